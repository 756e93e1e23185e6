"""Many configuration steps as one shell script, run in one SSH call. Under TCG each SSH
call is a session of the guest's SSH server and a shell of its own: about 0.3 s each on
an idle machine, more while a lab's other VMs boot (docs/vm.md). A step that fails stops
the script and is named by its index on the last line of stderr, so the error says which
step failed, with that step's own messages."""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

START, MARK = "hoplab-step", "hoplab-step-failed"


@dataclass(frozen=True)
class Step:
    what: str                     # for the error: "sysctls", "setup ip route ...", ...
    argv: Sequence[str]
    input: str | None = None      # its stdin; otherwise /dev/null
    env: tuple[tuple[str, str], ...] = ()


def script(steps: Sequence[Step]) -> str:
    """A POSIX shell script running `steps` in order, stopping at the first failure."""
    end = f"HOPLAB_END_{secrets.token_hex(6)}"
    out = []
    for i, s in enumerate(steps):
        out.append(f"echo '{START} {i}' >&2")
        cmd = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in s.env), shlex.join(s.argv)])
        if s.input is None:
            out.append(f"{cmd} </dev/null")
        else:
            assert end not in s.input
            body = s.input if s.input.endswith("\n") else s.input + "\n"
            out.append(f"{cmd} <<'{end}'\n{body}{end}")
        out.append(f'rc=$?; if [ "$rc" != 0 ]; then echo "{MARK} {i}" >&2; exit "$rc"; fi')
    return "\n".join(out) + "\n"


def failed(stderr: str) -> tuple[int, str] | None:
    """(index of the step that failed, its stderr) from the script's stderr, or None
    when no step failed (the script itself could not run)."""
    lines = stderr.rstrip("\n").split("\n")
    last = lines[-1].split()
    if len(last) != 2 or last[0] != MARK or not last[1].isdigit():
        return None
    start = f"{START} {last[1]}"
    first = max((n + 1 for n, line in enumerate(lines) if line == start), default=0)
    return int(last[1]), "\n".join(lines[first:-1])
