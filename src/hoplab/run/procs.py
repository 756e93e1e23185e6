"""Tool processes on lab nodes: start, wait until a server listens, stop.

Every process a test starts goes through its node's executor and is
registered with a ProcessGroup, which stops them all on any exit path (end of
test, error, Ctrl-C): nothing is left behind, and each is written into the
lab's process log while it runs (hoplab.nodes.tracking), so `hoplab clean`
stops it after a SIGKILL.
Output goes to files, not pipes, so a chatty tool (ping at 50 Hz for minutes)
never blocks on a full pipe.

The group also notes when a flow's data began to move: the first moment one of
its processes (client or server) had written more than its control messages
(Executor.written, /proc/PID/io wchar in a namespace, read every millisecond
until then). A bulk tool's own clock starts within a round trip of it, and only
whole seconds of that start are in its report (see hoplab.kinds.tcp). A node
that cannot answer that cheaply (a device) answers None, and the flow is placed
by its report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hoplab.errors import HoplabError
from hoplab.kinds.flow import ClientTimes
from hoplab.nodes.executor import Executor, Process
from hoplab.nodes.tracking import ProcessRecord

# Bytes a process writes before its data moves: iperf3's cookie (37 bytes per
# connection), its parameters (a JSON object of some 300 bytes) and one-byte states.
# The first data write is a 128 KiB block (TCP) or a datagram (UDP, 1460 bytes by
# default): two of those cross this.
CONTROL_BYTES = 2048
_POLL_S = 0.001


class DataStart:
    """When the first of a flow's processes had written more than CONTROL_BYTES: the
    midpoint of the two polls between which it crossed (a millisecond apart unless
    the machine is busy)."""

    def __init__(self) -> None:
        self.at: float | None = None
        # How much each of its processes has written so far (None once it is gone).
        self.pids: list[Callable[[], int | None]] = []
        self.polled: float | None = None
        # The poll that saw the data: `at` is within (polled, seen), which a busy
        # machine's scheduler widens.
        self.seen: float | None = None


class _Watcher:
    """One thread polling the watched flows' processes until each flow's data moves,
    then sleeping until a flow is added: a thousand wake-ups a second through a whole
    test would take CPU from the flows it measures."""

    def __init__(self) -> None:
        self.flows: list[DataStart] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.wake = threading.Event()    # set by add() and stop()
        self.thread = threading.Thread(target=self._run, name="hoplab-data-start",
                                       daemon=True)
        self.thread.start()

    def add(self, ds: DataStart, written: Callable[[], int | None]) -> None:
        with self.lock:
            ds.pids.append(written)
            if ds not in self.flows:
                self.flows.append(ds)
            self.wake.set()

    def _run(self) -> None:
        while not self.done.wait(_POLL_S):
            with self.lock:
                flows = [ds for ds in self.flows if ds.at is None and ds.pids]
                self.flows = flows
                if not flows:
                    self.wake.clear()
            if not flows:
                self.wake.wait()
                continue
            for ds in flows:
                with self.lock:
                    pids = list(ds.pids)
                now = time.time()
                seen = [(read, read()) for read in pids]
                if any(n is not None and n > CONTROL_BYTES for _, n in seen):
                    ds.at = now if ds.polled is None else (ds.polled + now) / 2
                    ds.seen = now
                    continue
                ds.polled = now
                gone = {id(read) for read, n in seen if n is None}
                with self.lock:  # an exited process has no io file: stop polling it
                    ds.pids = [read for read in ds.pids if id(read) not in gone]

    def stop(self) -> None:
        self.done.set()
        self.wake.set()
        self.thread.join(timeout=1.0)


@dataclass
class Proc:
    name: str
    process: Process
    node: Executor
    data: DataStart | None = None  # its flow's, when watched

    @property
    def argv(self) -> list[str]:
        return self.process.argv

    @property
    def out(self) -> Path:
        return self.process.out

    @property
    def err(self) -> Path:
        return self.process.err

    @property
    def started(self) -> float:
        """Unix time just before its start."""
        return self.process.started

    def poll(self) -> int | None:
        return self.process.poll()

    def output(self) -> bytes:
        return self.out.read_bytes() if self.out.exists() else b""

    def stop(self, grace: float = 2.0) -> None:
        self.node.stop(self.process, grace)

    def output_done(self) -> float | None:
        """Unix time of the last write to the tool's output, None when it wrote nothing.

        A tool that reports once, when it is done (iperf3 -J), wrote it at the end of its
        test: this, less the test's length as the tool measured it, is when the test
        started, which the process's start time is not (see hoplab.kinds.tcp)."""
        try:
            st = self.out.stat()
        except FileNotFoundError:
            return None
        return st.st_mtime_ns / 1e9 if st.st_size else None

    def times(self) -> ClientTimes:
        return ClientTimes(self.started, self.data.at if self.data else None,
                           self.output_done())

    def errors(self) -> str:
        text = self.err.read_text(errors="replace") if self.err.exists() else ""
        return " ".join(text.split())[:500]


class ProcessGroup:
    def __init__(self, workdir: Path, nodes: Mapping[str, Executor], lab: str) -> None:
        self.workdir = workdir
        self.nodes = nodes
        self.procs: list[Proc] = []
        self.flows: dict[str, DataStart] = {}
        self.record = ProcessRecord(lab)
        self._watcher: _Watcher | None = None

    def will_undo(self, node: str, argv: Sequence[str]) -> None:
        self.record.will_undo(node, argv)

    def undone(self, node: str, argv: Sequence[str]) -> None:
        self.record.undone(node, argv)

    def start(self, name: str, node: str, argv: Sequence[str], flow: str | None = None
              ) -> Proc:
        """Start argv on node. With `flow`, note when that flow's data began to move: the
        processes started with one flow name share one DataStart."""
        slug = name.replace("/", "_").replace(" ", "_")
        out, err = self.workdir / f"{slug}.out", self.workdir / f"{slug}.err"
        ex = self.nodes[node]
        try:
            # Written down before the tool runs: a SIGKILL of hoplab cannot leave it
            # running unrecorded on a device.
            process = ex.start(name, argv, out=out, err=err,
                               noted=lambda p: self.record.started(p, f"test: {name}"))
        except FileNotFoundError:
            raise HoplabError(f"cannot start {argv[0]}: not installed") from None
        proc = Proc(name, process, ex)
        self.procs.append(proc)
        if flow is not None:
            proc.data = self.flows.setdefault(flow, DataStart())
            if self._watcher is None:
                self._watcher = _Watcher()
            self._watcher.add(proc.data, lambda: ex.written(process))
        return proc

    def stop(self, proc: Proc, grace: float = 2.0) -> None:
        proc.node.stop(proc.process, grace)

    def stop_all(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        try:
            for proc in reversed(self.procs):
                self.stop(proc)
        finally:
            self.record.stopped(p.process.ident for p in self.procs
                                if p.process.poll() is not None)


# A listening TCP socket, an unconnected UDP one: the `st` column of /proc/net/{tcp,udp}.
_LISTEN_STATE = {"tcp": "0A", "udp": "07"}


def _listening(node: Executor, proto: str) -> set[int]:
    """Ports with a listening socket on node, from /proc/net: a namespace and a device
    alike (OpenWrt has no `ss`); thread-self, since a namespace is a thread's."""
    ports = set()
    for table in (proto, f"{proto}6"):
        raw = node.read_file(f"/proc/thread-self/net/{table}", timeout=10)
        if raw is None:
            raw = node.read_file(f"/proc/net/{table}", timeout=10)
        for line in (raw or b"").decode(errors="replace").splitlines()[1:]:
            fields = line.split()
            # sl local_address rem_address st ...; the local port is hex after the ':'
            if len(fields) > 3 and fields[3] == _LISTEN_STATE[proto]:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def wait_listening(node: Executor, proto: str, ports: Iterable[int], procs: Sequence[Proc],
                   timeout: float = 10.0) -> None:
    """Return once every port listens on node; fail early, naming the tool, if one of
    the server processes exits instead."""
    want = set(ports)
    deadline = time.monotonic() + timeout
    while True:
        missing = want - _listening(node, proto)
        if not missing:
            return
        for p in procs:
            code = p.poll()
            if code is not None:
                raise HoplabError(f"{p.name} exited before it listened "
                                  f"(exit {code}): {p.errors() or 'no message'}")
        if time.monotonic() > deadline:
            raise HoplabError(f"servers on {node.node} did not listen on {proto} "
                              f"{sorted(missing)} within {timeout:g} s")
        time.sleep(0.02)


def wait_ready(procs: Sequence[Proc], timeout: float) -> None:
    """Return once each of `procs` (clients started before the test's clock) has written a
    whole line, the sign it is up; fail, naming it, if one exits first or it takes longer
    than `timeout`."""
    deadline = time.monotonic() + timeout
    waiting = list(procs)
    while waiting:
        waiting = [p for p in waiting if b"\n" not in p.output()]
        for p in waiting:
            code = p.poll()
            if code is not None and b"\n" not in p.output():
                raise HoplabError(f"{p.name} exited before it was ready "
                                  f"(exit {code}): {p.errors() or 'no message'}")
        if waiting and time.monotonic() > deadline:
            raise HoplabError(f"{', '.join(p.name for p in waiting)} not ready within "
                              f"{timeout:g} s of its start")
        if waiting:
            time.sleep(0.02)
