"""A pytest plugin: each test stops and reaps the processes it starts.

A Popen left running is reported, as a ResourceWarning (an error in this suite), wherever
the garbage collector finds it: in another test, which then fails for a leak it did not
make. This plugin fails the test that left the process, and kills and reaps it, so the
next test starts clean. Fixtures of a wider scope hold theirs from before the test; a
process that one starts later, from inside a test (the device farm's SSH servers, added
when a test first asks for a device), is declared with held(). tests/conftest.py loads
this plugin for the whole suite.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

# Processes a wider scope owns and reaps (the session's device farm), started during a test.
_HELD: set[int] = set()


def held(pid: int) -> None:
    """Process `pid`, started now, belongs to a fixture of a wider scope, which reaps it."""
    _HELD.add(pid)


def _children() -> dict[int, str]:
    """This process's children, zombies too (a child is a child until it is reaped), with
    their command lines. /proc/self/task/*/children names each thread's own."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        with suppress(OSError):
            for pid in (task / "children").read_text().split():
                out[int(pid)] = _command(pid)
    return out


def _command(pid: str) -> str:
    """Its command line; a zombie has none left, nor a process half way through exec,
    but they have a name."""
    with suppress(OSError):
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
        if cmd:
            return cmd.decode(errors="replace")
    with suppress(OSError):
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
        zombie = stat[stat.rindex(")") + 2:].startswith("Z")
        return f"(exited, unreaped: {comm})" if zombie else comm
    return "(gone)"


@pytest.fixture(autouse=True)
def _reaps_what_it_starts() -> Iterator[None]:
    before = set(_children())
    yield
    left = {pid: cmd for pid, cmd in _children().items()
            if pid not in before and pid not in _HELD}
    for pid in left:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with suppress(ChildProcessError):
            os.waitpid(pid, 0)
    if left:
        pytest.fail("left running or unreaped: " +
                    "; ".join(f"pid {pid}: {cmd}" for pid, cmd in sorted(left.items())),
                    pytrace=False)
