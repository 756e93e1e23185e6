"""A node that is a network namespace on this machine: the one way hoplab runs a
command in a namespace.

Short commands run in a thread that entered the namespace with setns()
(hoplab.nodes.netns.entered: 1.2 ms per namespace where `ip -n` costs 1.8 and
pyroute2 4.5, bench/netns_methods.py); long-lived processes start through
`ip netns exec`, which also mounts the lab's hosts file so node names resolve,
and each gets its own session so Ctrl-C at the terminal reaches hoplab only, with
SIGHUP, SIGINT and SIGTERM at their defaults, so that the signals hoplab sends reach it.
The lab engine, which builds the namespaces, also uses `inside()` (Python's own
work in the namespace: sysctls, netlink) and `popen()` (its daemons: the wires,
wireguard-go) of the executors the registry gives it.
A process is told apart from a later one with its PID by its start time in
/proc/PID/stat, which is what the lab's record keeps for `hoplab clean`.

A namespace shares this machine's kernel and CPUs: its counters come from
/proc/thread-self/net/* and a netlink socket opened inside it, read by one
thread that entered it once; its CPU is the host's series (proc_stat None). A
node made with `stats` (a userspace wire) also gives that counters file's text.
With netns None the executor is this machine as it is (the root namespace),
what perf and the tests of this module use.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hoplab.errors import LabError
from hoplab.held_stops import stops_held
from hoplab.nodes import netns as ns_lib
from hoplab.nodes.client import Client
from hoplab.nodes.executor import (
    LOCAL_MACHINE,
    Completed,
    CounterSource,
    ExecutorError,
    LineChannel,
    Process,
    ProcessId,
    Snapshot,
)
from hoplab.nodes.procs import Proc, proc_start_time, reap, written_by
from hoplab.tools import inet_diag, netlink_lib
from hoplab.tools.inet_diag import NETLINK_SOCK_DIAG
from hoplab.tools.tc import from_netlink

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pyroute2 import IPRoute

    from hoplab.tools.ss import Socket
    from hoplab.tools.tc import QdiscStats


@dataclass
class NetnsProcess:
    name: str
    argv: list[str]
    ident: ProcessId
    out: Path
    err: Path
    started: float
    popen: subprocess.Popen[bytes]

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.name} still runs after {timeout:g} s") from None


class _PipeChannel:
    """A request/response child: one line in, lines out up to the terminator. Its output
    is read from the pipe's descriptor (a buffered reader would hide lines it has
    read ahead from select)."""

    def __init__(self, popen: subprocess.Popen[bytes], terminator: str, node: str) -> None:
        self.popen = popen
        self.terminator = terminator
        self.node = node
        self._buf = b""

    def ask(self, line: str, timeout: float) -> list[str]:
        import selectors

        assert self.popen.stdin is not None and self.popen.stdout is not None
        try:
            self.popen.stdin.write(line.encode() + b"\n")
            self.popen.stdin.flush()
        except OSError as exc:
            raise ExecutorError(f"node {self.node}: channel closed ({exc})") from None
        out: list[str] = []
        fd = self.popen.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                while b"\n" in self._buf:
                    got, self._buf = self._buf.split(b"\n", 1)
                    text = got.decode(errors="replace")
                    if text == self.terminator:
                        return out
                    out.append(text)
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise TimeoutError(f"node {self.node}: no reply within {timeout:g} s")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise ExecutorError(f"node {self.node}: channel ended")
                self._buf += chunk

    def close(self) -> None:
        if self.popen.stdin is not None:
            with suppress(OSError):
                self.popen.stdin.close()
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stdout is not None:
            self.popen.stdout.close()


class NetnsCounters:
    """Counters of one namespace, read by the thread that created this source: it
    enters the namespace once and stays there until close(). A namespace deleted
    while it is sampled is noticed on the next read (the thread's own reference
    would otherwise keep it and its counters alive after `ip netns del`)."""

    def __init__(self, netns: str | None, kinds: frozenset[str],
                 stats: str | None = None) -> None:
        self.netns = netns
        self.kinds = kinds
        self.stats = stats
        self._ctx: AbstractContextManager[None] | None = None
        self._ipr: IPRoute | None = None
        self._diag: socket.socket | None = None
        self._names: dict[int, str] = {}
        if netns is not None:
            self._ctx = ns_lib.entered(netns)
            self._ctx.__enter__()
        try:
            self._mine = ns_lib.ns_id("/proc/thread-self/ns/net")
            if "qdisc" in kinds:
                netlink_lib.load()
                from pyroute2 import IPRoute

                self._ipr = IPRoute()
            if "tcp_info" in kinds:
                # Made after setns(): it asks this namespace's kernel.
                self._diag = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                                           NETLINK_SOCK_DIAG)
                self._diag.bind((0, 0))
        except BaseException:
            self.close()
            raise

    def read(self) -> Snapshot:
        if self.netns is not None:
            try:
                named: tuple[int, int] | None = ns_lib.ns_id(ns_lib.path(self.netns))
            except FileNotFoundError:
                named = None
            if named != self._mine:
                raise LabError(f"namespace {self.netns} disappeared")
        snap = Snapshot()
        if "ifaces" in self.kinds:
            snap.net_dev = _text("/proc/thread-self/net/dev")
        if self._ipr is not None:
            snap.qdiscs = _qdiscs(self._ipr, self._names)
        if "tcp" in self.kinds:
            snap.snmp = _text("/proc/thread-self/net/snmp")
            try:
                snap.netstat = _text("/proc/thread-self/net/netstat")
            except FileNotFoundError:
                snap.missing["tcp.lost_retransmit"] = "no /proc/net/netstat"
        if "wire" in self.kinds and self.stats is not None:
            with suppress(OSError):     # not written yet: nothing to record
                snap.wire = _text(self.stats)
        if self._diag is not None:
            snap.sockets = _tcp_sockets(self._diag)
        return snap

    def close(self) -> None:
        if self._ipr is not None:
            self._ipr.close()
            self._ipr = None
        if self._diag is not None:
            self._diag.close()
            self._diag = None
        if self._ctx is not None:
            ctx, self._ctx = self._ctx, None
            ctx.__exit__(None, None, None)


def _text(path: str) -> str:
    with open(path) as f:
        return f.read()


def _qdiscs(ipr: IPRoute, names: dict[int, str]) -> list[QdiscStats]:
    msgs = list(ipr.get_qdiscs())
    try:
        return from_netlink(msgs, names)
    except KeyError:
        # An interface we have not seen (or renamed): refresh the index map once.
        names.clear()
        names.update({link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()})
        # An interface deleted between the two dumps has no name any more: leave it out.
        return from_netlink([m for m in msgs if m["index"] in names], names)


def _tcp_sockets(diag: socket.socket) -> list[Socket]:
    """The namespace's established TCP sockets of both families, with their tcp_info
    (hoplab.tools.inet_diag: a netlink dump, no fork)."""
    out: list[Socket] = []
    for family in (socket.AF_INET, socket.AF_INET6):
        diag.send(inet_diag.request(family))
        data = b""
        while not inet_diag.complete(data):
            data += diag.recv(65536)
        out += inet_diag.parse(data)
    return out


def _default_stops() -> None:
    """Run in a long-lived process's child before exec: hoplab stops and signals it with
    these, and a signal ignored on entry stays ignored (a shell cannot even trap it). This
    process may have them ignored: a script's background job ignores SIGINT."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


class NetnsExecutor(Client):
    kind = "netns"
    machine = LOCAL_MACHINE
    shares_kernel = True

    def __init__(self, node: str, netns: str | None, *, stats: str | None = None) -> None:
        self.node = node
        self.netns = netns
        self.stats = stats
        self.where = {"netns": netns} if netns is not None else {}
        self._procs: list[NetnsProcess] = []

    def __repr__(self) -> str:
        return f"NetnsExecutor({self.node!r}, {self.netns!r})"

    def inside(self) -> AbstractContextManager[None]:
        """The body runs with this thread in the node's namespace (Python's own work
        there: a sysctl written, a netlink socket opened); this machine as it is when
        netns is None. A namespace that does not exist is a LabError."""
        from contextlib import nullcontext

        return ns_lib.entered(self.netns) if self.netns is not None else nullcontext()

    def _as_user(self, argv: Sequence[str]) -> list[str]:
        return ns_lib.exec_argv(self.netns, argv) if self.netns is not None else list(argv)

    def popen(self, argv: Sequence[str], *, as_user: bool = False,
              **how: Any) -> subprocess.Popen[bytes]:
        """Start argv in the node's namespace as subprocess.Popen(argv, **how) would,
        with nothing tracked: for a lab's own daemons (a wire, wireguard-go), which the
        lab's record tracks. With `as_user`, through `ip netns exec` (the lab's hosts
        file, the namespace's /sys; the PID is still argv's), else the child simply
        inherits the namespace of the thread that starts it."""
        if as_user:
            return subprocess.Popen(self._as_user(argv), **how)
        with self.inside():
            return subprocess.Popen(list(argv), **how)

    def run(self, argv: Sequence[str], *, input: str | None = None,
            timeout: float = 60.0, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> Completed:
        args = list(argv)
        full_env = {**os.environ, **env} if env is not None else None
        try:
            with self.inside():
                done = subprocess.run(args, input=input, capture_output=True, text=True,
                                      errors="replace", check=False, timeout=timeout,
                                      env=full_env, cwd=cwd,
                                      stdin=None if input is not None else subprocess.DEVNULL)
        except LabError as exc:
            raise ExecutorError(f"node {self.node}: {exc}") from None
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"node {self.node}: {' '.join(args)} did not finish in "
                               f"{timeout:g} s; stopped") from None
        except FileNotFoundError:
            # As a shell says it, so a caller reads one answer from every kind of node.
            return Completed(tuple(args), 127, "", f"{args[0]}: command not found")
        except PermissionError as exc:
            return Completed(tuple(args), 126, "", f"{args[0]}: {exc.strerror}")
        return Completed(tuple(args), done.returncode, done.stdout, done.stderr)

    def interact(self, argv: Sequence[str], *, stdin: int, stdout: int, stderr: int,
                 timeout: float | None = None) -> int:
        # `hoplab lab exec` into a namespace execs `ip netns exec` in place (cheaper);
        # this is the same for a caller that keeps running.
        full = self._as_user(argv)
        try:
            code = subprocess.run(full, stdin=stdin, stdout=stdout, stderr=stderr,
                                  check=False, timeout=timeout).returncode
        except FileNotFoundError:
            os.write(stderr, f"{full[0]}: command not found\n".encode())
            return 127
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"node {self.node}: {argv[0]} did not finish in "
                               f"{timeout:g} s; stopped") from None
        return 128 - code if code < 0 else code

    def start(self, name: str, argv: Sequence[str], *, out: Path, err: Path,
              noted: Callable[[Process], None] | None = None) -> NetnsProcess:
        # A stop held until the tool is listed and noted: one landing after Popen's fork
        # would leave it running, known to no one.
        with stops_held(), out.open("wb") as fo, err.open("wb") as fe:
            started = time.time()
            try:
                popen = self.popen(argv, as_user=True, stdout=fo, stderr=fe,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   preexec_fn=_default_stops)
            except FileNotFoundError:
                raise ExecutorError(f"node {self.node}: cannot start "
                                    f"{self._as_user(argv)[0]}: not installed") from None
            # `ip netns exec` execs the tool in place: this PID is the tool's. A process
            # that is already a zombie has no start time; it is our child, so its PID is
            # not reused.
            ticks = proc_start_time(popen.pid) or 0
            proc = NetnsProcess(name, list(argv), ProcessId(self.node, popen.pid, ticks),
                                out, err, started, popen)
            self._procs.append(proc)
            # A process in a lab's namespace that a SIGKILL leaves is found by its
            # namespace too (hoplab clean), so it is noted once started.
            if noted is not None:
                noted(proc)
        return proc

    def signal(self, proc: Process, signum: int) -> None:
        mine = self._own(proc)
        if mine.popen.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(mine.popen.pid, signum)

    def signal_recorded(self, signum: int, idents: Sequence[ProcessId]) -> set[ProcessId]:
        ours = {p.ident: p.popen for p in self._procs}
        alive = set()
        for ident in idents:
            popen = ours.get(ident)
            proc = Proc(ident.pid, ident.start_ticks, [], ident.node, "")
            if not proc.alive():
                if popen is None:
                    reap(proc)          # a process this one started without a Process
                else:
                    # Reaped by its Popen, which keeps its status: a waitpid of its own
                    # (reap) left Popen ECHILD, which it reads as exit 0 (a process
                    # stopped by SIGTERM said 0 when it died between two looks).
                    with suppress(subprocess.TimeoutExpired):
                        popen.wait(timeout=2)
                continue
            if signum:
                with suppress(ProcessLookupError):
                    os.kill(ident.pid, signum)
            alive.add(ident)
        return alive

    def release(self, proc: Process) -> None:
        mine = self._own(proc)
        if mine in self._procs:
            self._procs.remove(mine)
        mine.popen.poll()

    def written(self, proc: Process) -> int | None:
        return written_by(proc.ident.pid)

    def pids(self) -> set[int] | None:
        if self.netns is None:
            return None
        return set(ns_lib.processes_in([self.netns]).get(self.netns, []))

    def channel(self, argv: Sequence[str], terminator: str) -> LineChannel:
        full = self._as_user(argv)
        try:
            popen = subprocess.Popen(full, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=_default_stops)
        except FileNotFoundError:
            raise ExecutorError(f"node {self.node}: cannot start {full[0]}") from None
        return _PipeChannel(popen, terminator, self.node)

    def read_file(self, path: str, timeout: float = 10.0) -> bytes | None:
        # /proc/sys/net and /proc/net answer for the namespace of the reading thread.
        try:
            with self.inside(), open(path, "rb") as f:
                return f.read()
        except LabError as exc:
            raise ExecutorError(f"node {self.node}: {exc}") from None
        except (FileNotFoundError, NotADirectoryError):
            return None

    def copy_back(self, remote: str, local: Path, timeout: float = 600.0) -> None:
        # One file system: a copy, unless it is already there.
        if Path(remote).resolve() != local.resolve():
            shutil.copyfile(remote, local)

    def counters(self, kinds: frozenset[str]) -> CounterSource:
        return NetnsCounters(self.netns, kinds, self.stats)

    def close(self) -> None:
        # A process in uninterruptible sleep may outlive SIGKILL: it is left to the lab's
        # record (hoplab clean), as before the client.
        with suppress(ExecutorError):
            self.stop_all(list(reversed(self._procs)))
        self._procs.clear()

    def _own(self, proc: Process) -> NetnsProcess:
        if not isinstance(proc, NetnsProcess):
            raise TypeError(f"{proc.name} was not started by a namespace executor")
        return proc
