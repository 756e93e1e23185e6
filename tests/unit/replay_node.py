"""A kind of node that is not built into hoplab: a node that replays what a real node
said, from a directory. tests/unit/test_nodes_seam.py registers it with one line and
runs a whole test on it; it is one module and imports nothing of hoplab but the
executor's interface and the client (hoplab.nodes.client) it inherits: all a new kind
of node takes is a transport (hoplab.nodes.transport). Which tools it has and its facts
are what the directory says, not what a shell on it would.

Its entry in a lab's summary is {"kind": "replay", "dir": DIRECTORY}, where
`DIRECTORY/TOOL.out` is what TOOL printed (a command or a process started with it
gives that as its output) and `DIRECTORY/files/PATH` is the node's file PATH. Its
counters are its files /proc/net/dev and /proc/net/snmp, read again at every tick;
what it has no file for is said missing, never zero.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoplab.nodes.client import Client
from hoplab.nodes.executor import (
    Completed,
    ExecutorError,
    Facts,
    LineChannel,
    Process,
    ProcessId,
    Snapshot,
)

RUNS_FOR_S = 0.3        # how long a replayed process takes to say what it said
_PIDS = itertools.count(70000)


def make(node: str, entry: Mapping[str, Any]) -> ReplayExecutor:
    """The registry's factory: the executor of a node from its summary entry."""
    return ReplayExecutor(node, Path(str(entry["dir"])))


@dataclass
class ReplayProcess:
    name: str
    argv: list[str]
    ident: ProcessId
    out: Path
    err: Path
    started: float
    code: int | None = None

    def poll(self) -> int | None:
        if self.code is None and time.time() >= self.started + RUNS_FOR_S:
            self.code = 0
        return self.code

    def wait(self, timeout: float) -> int:
        deadline = time.time() + timeout
        while (code := self.poll()) is None:
            if time.time() >= deadline:
                raise TimeoutError(f"{self.name} still runs after {timeout:g} s")
            time.sleep(0.01)
        return code


class ReplayCounters:
    def __init__(self, node: ReplayExecutor, kinds: frozenset[str]) -> None:
        self.node, self.kinds = node, kinds

    def read(self) -> Snapshot:
        snap = Snapshot()
        got = {"ifaces": "/proc/net/dev", "tcp": "/proc/net/snmp"}
        for kind in sorted(self.kinds):
            text = self.node.read_file(got[kind]) if kind in got else None
            if text is None:
                snap.missing[kind] = "not recorded"
            elif kind == "ifaces":
                snap.net_dev = text.decode()
            else:
                snap.snmp = text.decode()
        return snap

    def close(self) -> None:
        pass


class ReplayExecutor(Client):
    kind = "replay"

    def __init__(self, node: str, directory: Path) -> None:
        self.node = node
        self.directory = directory
        self.machine = f"replay:{directory}"
        self.calls: list[list[str]] = []
        self.started: list[ReplayProcess] = []
        self.closed = False

    def _said(self, tool: str) -> bytes:
        path = self.directory / f"{os.path.basename(tool)}.out"
        return path.read_bytes() if path.exists() else b""

    def run(self, argv: Sequence[str], *, input: str | None = None,
            timeout: float = 60.0, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> Completed:
        self.calls.append(list(argv))
        return Completed(tuple(argv), 0, self._said(argv[0]).decode(), "")

    def interact(self, argv: Sequence[str], *, stdin: int, stdout: int, stderr: int,
                 timeout: float | None = None) -> int:
        os.write(stdout, self.run(argv).stdout.encode())
        return 0

    def start(self, name: str, argv: Sequence[str], *, out: Path, err: Path,
              noted: Callable[[Process], None] | None = None) -> ReplayProcess:
        self.calls.append(list(argv))
        out.write_bytes(self._said(argv[0]))
        err.write_bytes(b"")
        proc = ReplayProcess(name, list(argv), ProcessId(self.node, next(_PIDS), 1), out, err,
                             time.time())
        if noted is not None:
            noted(proc)
        self.started.append(proc)
        return proc

    def signal(self, proc: Process, signum: int) -> None:
        if isinstance(proc, ReplayProcess) and proc.poll() is None:
            proc.code = -signum

    def signal_recorded(self, signum: int, idents: Sequence[ProcessId]) -> set[ProcessId]:
        # Nothing a replay started outlives it: only its own processes can be alive.
        running = {p.ident: p for p in self.started if p.poll() is None}
        for i in idents:
            if signum and i in running:
                self.signal(running[i], signum)
        return {i for i in idents if i in running and running[i].poll() is None}

    def pids(self) -> set[int] | None:
        return {p.ident.pid for p in self.started}

    def channel(self, argv: Sequence[str], terminator: str) -> LineChannel:
        raise ExecutorError(f"node {self.node}: a replay has no channel")

    def read_file(self, path: str, timeout: float = 10.0) -> bytes | None:
        file = self.directory / "files" / path.lstrip("/")
        return file.read_bytes() if file.is_file() else None

    def copy_back(self, remote: str, local: Path, timeout: float = 600.0) -> None:
        if Path(remote).resolve() != local.resolve():
            shutil.copyfile(remote, local)

    def which(self, tools: Sequence[str]) -> dict[str, str | None]:
        return {t: t if (self.directory / f"{t}.out").exists() else None for t in tools}

    def facts(self) -> Facts:
        return Facts(values={"replayed_from": str(self.directory)})

    def counters(self, kinds: frozenset[str]) -> ReplayCounters:
        return ReplayCounters(self, kinds)

    def close(self) -> None:
        self.closed = True
