"""A node for unit tests: records every call, answers from a script, starts nothing.

    node = FakeExecutor("r1")
    node.reply(["ss", "-Hltn"], stdout="LISTEN 0 5 *:5201 *:*\\n")
    node.files["/proc/sys/net/ipv4/ip_forward"] = b"1\\n"
    node.snapshots = [Snapshot(net_dev=...), ...]
    node.reboot_answers = [False, True]   # what check_rebooted() answers, in turn

A started process is a FakeProcess whose output file holds what `outputs`
gives for its argv[0] (or nothing) and which exits with status 0 after
`runs_for` seconds of this machine's clock, or when stopped. Commands without
a scripted reply succeed with no output; `calls` lists every argv run, in order.

It is a transport under hoplab.nodes.client like every kind (stop and stop_recorded
are the client's: `stopped` lists what was released, `stopped_recorded` what a record
named), but which, facts and check_rebooted answer from the script.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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

_PIDS = itertools.count(40000)


@dataclass
class FakeProcess:
    name: str
    argv: list[str]
    ident: ProcessId
    out: Path
    err: Path
    started: float
    runs_for: float = 0.0
    returncode: int | None = None
    signals: list[int] = field(default_factory=list)

    def poll(self) -> int | None:
        if self.returncode is None and time.time() >= self.started + self.runs_for:
            self.returncode = 0
        return self.returncode

    def wait(self, timeout: float) -> int:
        deadline = time.time() + timeout
        while (code := self.poll()) is None:
            if time.time() >= deadline:
                raise TimeoutError(f"{self.name} still runs after {timeout:g} s")
            time.sleep(min(0.01, self.started + self.runs_for - time.time()))
        return code


class FakeChannel:
    def __init__(self, answer: Callable[[str], list[str]]) -> None:
        self.answer = answer
        self.asked: list[str] = []
        self.closed = False

    def ask(self, line: str, timeout: float) -> list[str]:
        if self.closed:
            raise ExecutorError("channel closed")
        self.asked.append(line)
        return self.answer(line)

    def close(self) -> None:
        self.closed = True


class FakeCounters:
    """Hands out the executor's snapshots in turn, repeating the last one."""

    def __init__(self, node: FakeExecutor, kinds: frozenset[str]) -> None:
        self.node = node
        self.kinds = kinds
        self.reads = 0
        self.closed = False

    def read(self) -> Snapshot:
        snaps = self.node.snapshots
        if not snaps:
            raise ExecutorError(f"node {self.node.node}: no snapshots scripted")
        snap = snaps[min(self.reads, len(snaps) - 1)]
        self.reads += 1
        return snap

    def close(self) -> None:
        self.closed = True


class FakeExecutor(Client):
    kind = "fake"

    def __init__(self, node: str, *, machine: str = "fake", runs_for: float = 0.0) -> None:
        self.node = node
        self.machine = machine
        self.runs_for = runs_for
        self.calls: list[list[str]] = []
        self.cwds: list[str | None] = []
        self.replies: dict[tuple[str, ...], Completed] = {}
        self.outputs: dict[str, bytes] = {}
        self.files: dict[str, bytes] = {}
        self.tools: dict[str, str | None] = {}
        self.snapshots: list[Snapshot] = []
        self.fact_values: Facts = Facts()
        self.started: list[FakeProcess] = []
        self.stopped: list[FakeProcess] = []
        self.stopped_recorded: list[ProcessId] = []
        self.answer: Callable[[str], list[str]] = lambda _line: []
        self.whole_machine = False   # pids() is None, as on a device
        self.reboot_answers: list[bool] = []     # check_rebooted's answers in turn, then False
        self.closed = False

    def reply(self, argv: Sequence[str], *, stdout: str = "", stderr: str = "",
              returncode: int = 0) -> None:
        """Script the answer to one argv (matched exactly)."""
        self.replies[tuple(argv)] = Completed(tuple(argv), returncode, stdout, stderr)

    def run(self, argv: Sequence[str], *, input: str | None = None,
            timeout: float = 60.0, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> Completed:
        self.calls.append(list(argv))
        self.cwds.append(cwd)
        return self.replies.get(tuple(argv), Completed(tuple(argv), 0, "", ""))

    def interact(self, argv: Sequence[str], *, stdin: int, stdout: int, stderr: int,
                 timeout: float | None = None) -> int:
        done = self.run(argv, timeout=timeout or 60.0)
        os.write(stdout, done.stdout.encode())
        os.write(stderr, done.stderr.encode())
        return done.returncode

    def start(self, name: str, argv: Sequence[str], *, out: Path, err: Path,
              noted: Callable[[Process], None] | None = None) -> FakeProcess:
        self.calls.append(list(argv))
        out.write_bytes(self.outputs.get(argv[0], b""))
        err.write_bytes(b"")
        proc = FakeProcess(name, list(argv), ProcessId(self.node, next(_PIDS), 1), out, err,
                           time.time(), self.runs_for)
        if noted is not None:
            noted(proc)
        self.started.append(proc)
        return proc

    def signal(self, proc: Process, signum: int) -> None:
        assert isinstance(proc, FakeProcess)
        proc.signals.append(signum)
        if proc.returncode is None:
            proc.returncode = -signum

    def signal_recorded(self, signum: int, idents: Sequence[ProcessId]) -> set[ProcessId]:
        running = {p.ident: p for p in self.started if p.poll() is None}
        if signum == signal.SIGTERM:    # the client's first step of stop_recorded
            self.stopped_recorded += idents
        for i in idents:
            if signum and i in running:
                self.signal(running[i], signum)
        return {i for i in idents if i in running and running[i].poll() is None}

    def release(self, proc: Process) -> None:
        assert isinstance(proc, FakeProcess)
        self.stopped.append(proc)

    def pids(self) -> set[int] | None:
        # A whole machine (as a device is) has no PIDs of its own to tell apart.
        return None if self.whole_machine else {p.ident.pid for p in self.started}

    def channel(self, argv: Sequence[str], terminator: str) -> LineChannel:
        self.calls.append(list(argv))
        return FakeChannel(self.answer)

    def read_file(self, path: str, timeout: float = 10.0) -> bytes | None:
        return self.files.get(path)

    def copy_back(self, remote: str, local: Path, timeout: float = 600.0) -> None:
        if remote in self.files:
            local.write_bytes(self.files[remote])
        elif Path(remote).exists():  # a file a fake process "wrote" on this machine
            shutil.copyfile(remote, local)
        else:
            raise ExecutorError(f"node {self.node}: {remote} does not exist")

    # Scripted, where a real kind's come from the client (see the module's docstring).
    def which(self, tools: Sequence[str]) -> dict[str, str | None]:
        return {t: self.tools.get(t, f"/usr/bin/{t}") for t in tools}

    def facts(self) -> Facts:
        return self.fact_values

    def counters(self, kinds: frozenset[str]) -> FakeCounters:
        return FakeCounters(self, kinds)

    def check_rebooted(self) -> bool:
        return self.reboot_answers.pop(0) if self.reboot_answers else False

    def close(self) -> None:
        self.closed = True
