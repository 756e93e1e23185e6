"""Tool processes inside lab nodes: start, wait until a server listens, stop, reap.

Every process a test starts is registered with a ProcessGroup, which stops
them all on any exit path (end of test, error, Ctrl-C): nothing is left
behind. Output goes to files, not pipes, so a chatty tool (ping at 50 Hz for
minutes) never blocks on a full pipe.

The group also notes when a flow's data began to move: the first moment one of
its processes (client or server) had written more than its control messages
(/proc/PID/io wchar, read every millisecond until then). A bulk tool's own
clock starts within a round trip of it, and only whole seconds of that start
are in its report (see hoplab.run.outcome).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hoplab.errors import HoplabError
from hoplab.lab import netns

# Bytes a process writes before its data moves: iperf3's cookie (37 bytes per
# connection), its parameters (a JSON object of some 300 bytes) and one-byte states.
# The first data write is a 128 KiB block (TCP) or a datagram (UDP, 1460 bytes by
# default): two of those cross this.
CONTROL_BYTES = 2048
_POLL_S = 0.001


@dataclass(frozen=True)
class ClientTimes:
    """When a client ran, in Unix time: just before its exec, when its flow's data began
    to move (None when that was not watched or not seen) and its output's last write
    (None when it wrote nothing)."""
    started: float
    data_started: float | None
    output_done: float | None


class DataStart:
    """When the first of a flow's processes had written more than CONTROL_BYTES: the
    midpoint of the two polls between which it crossed (a millisecond apart unless
    the machine is busy)."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.pids: list[int] = []
        self.polled: float | None = None


def _written(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class _Watcher:
    """One thread polling the watched flows' processes until each flow's data moves."""

    def __init__(self) -> None:
        self.flows: list[DataStart] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="hoplab-data-start",
                                       daemon=True)
        self.thread.start()

    def add(self, ds: DataStart, pid: int) -> None:
        with self.lock:
            ds.pids.append(pid)
            if ds not in self.flows:
                self.flows.append(ds)

    def _run(self) -> None:
        while not self.done.wait(_POLL_S):
            with self.lock:
                flows = [ds for ds in self.flows if ds.at is None and ds.pids]
                self.flows = flows
            for ds in flows:
                with self.lock:
                    pids = list(ds.pids)
                now = time.time()
                seen = {pid: _written(pid) for pid in pids}
                if any(n is not None and n > CONTROL_BYTES for n in seen.values()):
                    ds.at = now if ds.polled is None else (ds.polled + now) / 2
                    continue
                ds.polled = now
                with self.lock:  # an exited process has no io file: stop polling it
                    ds.pids = [pid for pid in ds.pids if seen.get(pid, 0) is not None]

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=1.0)


@dataclass
class Proc:
    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    out: Path
    err: Path
    started: float  # Unix time just before the exec
    data: DataStart | None = None  # its flow's, when watched

    def output(self) -> bytes:
        return self.out.read_bytes() if self.out.exists() else b""

    def output_done(self) -> float | None:
        """Unix time of the last write to the tool's output, None when it wrote nothing.

        A tool that reports once, when it is done (iperf3 -J), wrote it at the end of its
        test: this, less the test's length as the tool measured it, is when the test
        started, which the process's start time is not (see hoplab.run.outcome)."""
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
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[Proc] = []
        self.flows: dict[str, DataStart] = {}
        self._watcher: _Watcher | None = None

    def start(self, name: str, ns: str, argv: Sequence[str], flow: str | None = None
              ) -> Proc:
        """Start argv in ns. With `flow`, note when that flow's data began to move: the
        processes started with one flow name share one DataStart."""
        slug = name.replace("/", "_").replace(" ", "_")
        out, err = self.workdir / f"{slug}.out", self.workdir / f"{slug}.err"
        full = netns.exec_argv(ns, argv)
        with out.open("wb") as fo, err.open("wb") as fe:
            started = time.time()
            try:
                # Its own process group, so Ctrl-C at the terminal reaches hoplab only and
                # hoplab decides how the tool stops (a killed iperf3 prints no JSON).
                popen = subprocess.Popen(full, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
            except FileNotFoundError:
                raise HoplabError(f"cannot start {argv[0]}: not installed") from None
        proc = Proc(name, list(argv), popen, out, err, started)
        self.procs.append(proc)
        if flow is not None:
            proc.data = self.flows.setdefault(flow, DataStart())
            if self._watcher is None:
                self._watcher = _Watcher()
            self._watcher.add(proc.data, popen.pid)
        return proc

    def stop(self, proc: Proc, grace: float = 2.0) -> None:
        if proc.popen.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.popen.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.popen.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def stop_all(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        for proc in reversed(self.procs):
            self.stop(proc)


def _listening(ns: str, proto: str) -> set[int]:
    flag = "-Hltn" if proto == "tcp" else "-Hlun"
    res = netns.run_in(ns, ["ss", flag], timeout=10)
    ports = set()
    for line in res.stdout.splitlines():
        fields = line.split()
        # State Recv-Q Send-Q Local:Port Peer:Port (UDP lists UNCONN as its state)
        if len(fields) >= 4:
            port = fields[3].rsplit(":", 1)[-1]
            if port.isdigit():
                ports.add(int(port))
    return ports


def wait_listening(ns: str, proto: str, ports: Iterable[int], procs: Sequence[Proc],
                   timeout: float = 10.0) -> None:
    """Return once every port listens in ns; fail early, naming the tool, if one of the
    server processes exits instead."""
    want = set(ports)
    deadline = time.monotonic() + timeout
    while True:
        missing = want - _listening(ns, proto)
        if not missing:
            return
        for p in procs:
            if p.popen.poll() is not None:
                raise HoplabError(f"{p.name} exited before it listened "
                                  f"(exit {p.popen.returncode}): {p.errors() or 'no message'}")
        if time.monotonic() > deadline:
            raise HoplabError(f"servers in {ns} did not listen on {proto} "
                              f"{sorted(missing)} within {timeout:g} s")
        time.sleep(0.02)
