"""Network namespaces on this machine, at the lowest level: where they are, putting a
thread inside one, the argv that runs a command inside one as a user would, and the
processes that live in them. hoplab.nodes.netns_exec.NetnsExecutor is built on these;
nothing else in hoplab enters a namespace or runs a command in one but through it.

Entering is setns() of the calling thread: measured by bench/netns_methods.py on the
2-core target, ms per namespace configured, one at a time / with a pool of 4 threads:
`ip -n NS -batch -` 3.5 / 1.8 (it also unshares a mount namespace and remounts /sys),
pyroute2 IPRoute opened inside the namespace 2.7 / 4.5 (it does not scale across
threads), setns() of the thread followed by a plain `ip -batch -` child 2.2 / 1.2. A
child process inherits the thread's namespace.

`hoplab lab exec` reads this module (through hoplab.lab.where) before it execs `ip
netns exec`: it imports only `os` at start-up (ctypes when a thread enters).
"""

from __future__ import annotations

import os

from hoplab.errors import LabError

# Not typing.TYPE_CHECKING: importing typing costs `lab exec` 3 ms; mypy treats a name
# TYPE_CHECKING as true whatever defines it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes
    from collections.abc import Sequence
    from types import TracebackType

NETNS_DIR = "/run/netns"
_CLONE_NEWNET = 0x40000000
_LIBC: list[ctypes.CDLL] = []


def path(name: str) -> str:
    """The file `ip netns add` bind-mounts namespace `name` on."""
    return os.path.join(NETNS_DIR, name)


def exists(name: str) -> bool:
    return os.path.exists(path(name))


def listed(prefix: str = "hoplab-") -> list[str]:
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def exec_argv(name: str, argv: Sequence[str]) -> list[str]:
    """argv that runs inside namespace `name` as a user would: `ip netns exec` also
    mounts the lab's hosts file over /etc/hosts (node names resolve) and the
    namespace's /sys, and execs argv in place (the PID it starts is argv's)."""
    return ["ip", "netns", "exec", name, *argv]


def _setns(fd: int) -> None:
    import ctypes

    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    if _LIBC[0].setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class entered:
    """`with entered(name):` runs the body with this thread inside namespace `name`,
    then brings the thread back (a class, not contextlib: see the module doc)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._home: int | None = None

    def __enter__(self) -> None:
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            try:
                target = os.open(path(self.name), os.O_RDONLY)
            except FileNotFoundError:
                raise LabError(f"network namespace {self.name} does not exist") from None
            try:
                _setns(target)
            finally:
                os.close(target)
        except BaseException:
            os.close(home)
            raise
        self._home = home

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        home, self._home = self._home, None
        assert home is not None
        try:
            _setns(home)
        finally:
            os.close(home)


def ns_id(file: str) -> tuple[int, int]:
    """What tells one namespace from another: the device and inode of its file."""
    st = os.stat(file)
    return st.st_dev, st.st_ino


def processes_in(namespaces: Sequence[str]) -> dict[str, list[int]]:
    """PIDs living in each namespace (matched by the namespace's inode), this process
    left out."""
    inodes: dict[tuple[int, int], str] = {}
    for ns in namespaces:
        try:
            inodes[ns_id(path(ns))] = ns
        except OSError:
            continue
    found: dict[str, list[int]] = {}
    if not inodes:
        return found
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            ns_name = inodes.get(ns_id(f"/proc/{entry}/ns/net"))
        except OSError:
            continue
        if ns_name is not None:
            found.setdefault(ns_name, []).append(int(entry))
    return found
