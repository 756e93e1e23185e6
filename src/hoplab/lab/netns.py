"""Network namespace primitives.

Configuring a namespace (lo up, a veth up, an address, a route), measured by
bench/netns_methods.py on the 2-core target, ms per namespace, one at a time /
with a pool of 4 threads: `ip -n NS -batch -` 3.5 / 1.8 (it also unshares a
mount namespace and remounts /sys), pyroute2 IPRoute opened inside the
namespace 2.7 / 4.5 (it does not scale across threads), and setns() of the
calling thread followed by a plain `ip -batch -` child 2.2 / 1.2. hoplab
therefore enters a namespace with setns() in a worker thread and runs one batch
per tool there; the child inherits the thread's namespace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hoplab.errors import LabError
from hoplab.lab import where

if TYPE_CHECKING:
    import ctypes
    import subprocess

# ctypes, subprocess and the thread pool are imported where they are used: commands
# that only look namespaces up should not pay for them at start-up.

NETNS_DIR = Path(where.NETNS_DIR)
_CLONE_NEWNET = 0x40000000
_R = TypeVar("_R")


@cache
def _libc() -> ctypes.CDLL:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    import ctypes

    if _libc().setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextmanager
def entered(name: str) -> Iterator[None]:
    """Run the body with this thread inside namespace `name`, then come back."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            target = os.open(NETNS_DIR / name, os.O_RDONLY)
        except FileNotFoundError:
            raise LabError(f"network namespace {name} does not exist") from None
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def exists(name: str) -> bool:
    return where.netns_exists(name)


def listed(prefix: str = "hoplab-") -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(prefix))
    except FileNotFoundError:
        return []


def ip_batch(lines: Sequence[str], what: str) -> None:
    """Run `ip -batch -` in the current namespace; a failure names the command."""
    _batch(["ip"], lines, what)


def tc_batch(lines: Sequence[str], what: str) -> None:
    _batch(["tc"], lines, what)


def _batch(tool: list[str], lines: Sequence[str], what: str) -> None:
    import subprocess

    if not lines:
        return
    proc = subprocess.run([*tool, "-batch", "-"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LabError(f"{what}: {tool[0]} failed: {_batch_error(proc.stderr, lines)}")


def _batch_error(stderr: str, lines: Sequence[str]) -> str:
    """iproute2 reports 'Command failed -:N'; show the command of line N."""
    msg = " ".join(stderr.split())
    for token in stderr.split():
        if token.startswith("-:") and token[2:].isdigit():
            n = int(token[2:])
            if 0 < n <= len(lines):
                return f"{msg} [{lines[n - 1].strip()}]"
    return msg


def run_in(name: str, argv: Sequence[str], *, input: str | None = None,
           timeout: float | None = 60.0) -> subprocess.CompletedProcess[str]:
    """Run argv inside namespace `name` and capture its output."""
    import subprocess

    with entered(name):
        return subprocess.run(list(argv), input=input, capture_output=True, text=True,
                              check=False, timeout=timeout)


def exec_argv(name: str, argv: Sequence[str]) -> list[str]:
    """argv that runs inside a node as a user would (see where.exec_argv)."""
    return where.exec_argv(name, argv)


def write_sysctls(values: Iterable[tuple[str, str]]) -> None:
    """Write net.* sysctls of the namespace this thread is in."""
    for key, value in values:
        path = Path("/proc/sys") / key.replace(".", "/")
        try:
            path.write_text(f"{value}\n")
        except FileNotFoundError:
            raise LabError(f"sysctl {key} does not exist in this kernel") from None
        except OSError as exc:
            raise LabError(f"sysctl {key} = {value}: {exc.strerror}") from None


def workers() -> int:
    return max(2, min(8, (os.cpu_count() or 2) * 2))


def in_each(names: Sequence[str], job: Callable[[str], _R]) -> list[_R]:
    """Run job(name) inside each namespace, a few threads at a time, in order."""
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> _R:
        with entered(name):
            return job(name)

    if len(names) <= 1:
        return [one(n) for n in names]
    pool = ThreadPoolExecutor(max_workers=workers())
    try:
        return list(pool.map(one, names))
    finally:
        # On Ctrl-C or an error, queued namespaces must not still be configured.
        pool.shutdown(wait=True, cancel_futures=True)
