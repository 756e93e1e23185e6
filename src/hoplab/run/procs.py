"""Tool processes inside lab nodes: start, wait until a server listens, stop, reap.

Every process a test starts is registered with a ProcessGroup, which stops
them all on any exit path (end of test, error, Ctrl-C): nothing is left
behind. Output goes to files, not pipes, so a chatty tool (ping at 50 Hz for
minutes) never blocks on a full pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hoplab.errors import HoplabError
from hoplab.lab import netns


@dataclass
class Proc:
    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    out: Path
    err: Path
    started: float  # Unix time just before the exec

    def output(self) -> bytes:
        return self.out.read_bytes() if self.out.exists() else b""

    def errors(self) -> str:
        text = self.err.read_text(errors="replace") if self.err.exists() else ""
        return " ".join(text.split())[:500]


class ProcessGroup:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[Proc] = []

    def start(self, name: str, ns: str, argv: Sequence[str]) -> Proc:
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
