"""The Executor written once on top of a transport (hoplab.nodes.client): stopping,
which tools, facts and reboots, on a scripted transport, on this machine's shell and on
the SSH transport with its commands answered here."""

from __future__ import annotations

import itertools
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hoplab.nodes import client as client_mod
from hoplab.nodes.client import Client
from hoplab.nodes.executor import (
    Completed,
    CounterSource,
    Executor,
    ExecutorError,
    LineChannel,
    Process,
    ProcessId,
)
from hoplab.nodes.netns_exec import NetnsExecutor
from hoplab.nodes.procs import proc_start_time
from hoplab.nodes.ssh_exec import SshExecutor
from hoplab.nodes.ssh_target import SshTarget

_PIDS = itertools.count(50000)


@dataclass
class Scripted:
    """A process that ends on the signals it does not ignore."""
    ident: ProcessId
    ignores: frozenset[int] = frozenset()
    alive: bool = True
    signals: list[int] = field(default_factory=list)
    name: str = "p"


class Script(Client):
    """A transport whose processes and boot readings are scripted."""
    kind = "script"
    machine = "script"

    def __init__(self, boots: Sequence[str] = ()) -> None:
        self.node = "r1"
        self.boots = list(boots)
        self.calls: list[list[str]] = []
        self.procs: dict[ProcessId, Scripted] = {}
        self.released: list[ProcessId] = []
        self.stdout = ""

    def proc(self, ignores: Sequence[int] = ()) -> Scripted:
        p = Scripted(ProcessId(self.node, next(_PIDS), 7), frozenset(ignores))
        self.procs[p.ident] = p
        return p

    def run(self, argv: Sequence[str], *, input: str | None = None,
            timeout: float = 60.0, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> Completed:
        self.calls.append(list(argv))
        out = self.boots.pop(0) if argv[2] == client_mod._BOOT else self.stdout
        return Completed(tuple(argv), 0, out, "")

    def signal(self, proc: Process | Scripted, signum: int) -> None:
        mine = self.procs[proc.ident]
        mine.signals.append(signum)
        mine.alive = mine.alive and signum in mine.ignores

    def signal_recorded(self, signum: int, idents: Sequence[ProcessId]) -> set[ProcessId]:
        live = {i for i in idents if i in self.procs and self.procs[i].alive}
        for i in live:
            if signum:
                self.signal(self.procs[i], signum)
        return live

    def release(self, proc: Process) -> None:
        self.released.append(proc.ident)

    def interact(self, argv: Sequence[str], *, stdin: int, stdout: int, stderr: int,
                 timeout: float | None = None) -> int:
        raise NotImplementedError

    def start(self, name: str, argv: Sequence[str], *, out: Path, err: Path,
              noted: Callable[[Process], None] | None = None) -> Process:
        raise NotImplementedError

    def channel(self, argv: Sequence[str], terminator: str) -> LineChannel:
        raise NotImplementedError

    def read_file(self, path: str, timeout: float = 10.0) -> bytes | None:
        raise NotImplementedError

    def copy_back(self, remote: str, local: Path, timeout: float = 600.0) -> None:
        raise NotImplementedError

    def counters(self, kinds: frozenset[str]) -> CounterSource:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _stop(node: Script, *procs: Scripted, grace: float = 0.05) -> None:
    node.stop_all(procs, grace)  # type: ignore[arg-type]  # Scripted has what stop needs


def test_a_transport_with_the_client_is_an_executor() -> None:
    ex: Executor = Script()
    assert isinstance(ex, Executor)


def test_stop_signals_sigterm_and_sigkill_only_what_outlives_it() -> None:
    node = Script()
    polite, stubborn, gone = node.proc(), node.proc([signal.SIGTERM]), node.proc()
    gone.alive = False
    _stop(node, polite, stubborn, gone)
    assert polite.signals == [signal.SIGTERM]
    assert stubborn.signals == [signal.SIGTERM, signal.SIGKILL] and not stubborn.alive
    assert gone.signals == []
    assert node.released == [polite.ident, stubborn.ident, gone.ident]


def test_a_process_that_survives_sigkill_is_named_and_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept tracked, so that close() tries again; the one that ended is released."""
    monkeypatch.setattr(client_mod, "KILL_WAIT_S", 0.05)
    node = Script()
    stuck, polite = node.proc([signal.SIGTERM, signal.SIGKILL]), node.proc()
    with pytest.raises(ExecutorError, match=rf"node r1: processes survive SIGKILL: "
                                            rf"\[{stuck.ident.pid}\]"):
        _stop(node, stuck, polite)
    assert node.released == [polite.ident]
    assert stuck.signals == [signal.SIGTERM, signal.SIGKILL]


def test_stop_recorded_signals_only_through_the_recorded_start_time() -> None:
    node = Script()
    p = node.proc([signal.SIGTERM])
    other = ProcessId("r1", p.ident.pid, p.ident.start_ticks + 1)   # the PID reused
    node.stop_recorded(other, grace=0.05)
    assert p.signals == [] and p.alive
    node.stop_recorded(p.ident, grace=0.05)
    assert p.signals == [signal.SIGTERM, signal.SIGKILL] and not p.alive
    with pytest.raises(ValueError, match="not a process of node r1"):
        node.stop_recorded(ProcessId("r2", 1, 1))


def test_a_reboot_is_an_uptime_gone_back_or_a_new_boot_id() -> None:
    node = Script(["100.5 aaa", "150.0 aaa", "20.0 aaa", "30.0 bbb", "40.0 bbb"])
    # The first look only records what it saw.
    assert [node.check_rebooted() for _ in range(5)] == [False, False, True, True, False]
    assert node.reboots == 2 and node.uptime() == 40.0


def test_a_reboot_seen_at_a_reconnection_is_told_once() -> None:
    node = Script(["100.0 aaa", "5.0 ccc", "6.0 ccc", "7.0 ccc"])
    node.look_for_reboot()
    node.look_for_reboot()      # as the transport does after a new connection
    assert node.check_rebooted() is True
    assert node.check_rebooted() is False
    assert node.reboots == 1


def test_a_one_off_executor_that_ignores_reboots_runs_no_look() -> None:
    node = Script(["100 a"])
    node.ignore_reboots()
    node.look_for_reboot()      # as the transport does after its first connection
    assert node.calls == [] and node.uptime() is None


def test_which_through_the_nodes_shell() -> None:
    node = Script()
    node.stdout = "/usr/sbin/ip\n\n"
    assert node.which(["ip", "nope"]) == {"ip": "/usr/sbin/ip", "nope": None}
    assert node.calls[-1][:2] == ["sh", "-c"] and node.calls[-1][-3:] == ["sh", "ip", "nope"]
    calls = len(node.calls)
    assert node.which([]) == {} and len(node.calls) == calls


class ThisShell(NetnsExecutor):
    """This machine, asked as a device would be: through its shell, not its lookup."""
    shares_kernel = False


def test_which_and_reboots_through_a_real_shell() -> None:
    ex = ThisShell("host", None)
    sh = shutil.which("sh")
    assert ex.which(["sh", "hoplab-no-such-tool"]) == {"sh": sh, "hoplab-no-such-tool": None}
    assert ex.check_rebooted() is False and ex.check_rebooted() is False
    up = ex.uptime()
    assert up is not None and up > 0


def test_a_node_that_shares_this_kernel_asks_nothing() -> None:
    node = Script()
    node.shares_kernel = True
    node.where = {"netns": "hoplab-x-r1"}
    assert node.check_rebooted() is False
    assert node.facts().values == {"netns": "hoplab-x-r1"} and node.facts().missing == {}
    assert node.which(["sh"]) == {"sh": shutil.which("sh")}
    assert node.calls == []


class Device(SshExecutor):
    """The SSH transport with its commands answered here, in the order the real one
    takes: note a new connection first, then connect (if it has to) and run."""

    def __init__(self, boots: Sequence[str]) -> None:
        super().__init__(SshTarget(node="r1", destination="root@192.0.2.1"))
        self.boots = list(boots)
        self.commands: list[str] = []
        self.lost = True        # no connection yet

    def _run_bytes(self, argv: Sequence[str], stdin: bytes | None, timeout: float,
                   env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> tuple[int, bytes, bytes]:
        self._note_connection()
        if self.lost:
            self.conn.connects += 1
            self.lost = False
        if argv[:3] == ["sh", "-c", client_mod._BOOT]:
            self.commands.append("boot")
            return 0, self.boots.pop(0).encode(), b""
        self.commands.append(argv[0])
        return 0, b"", b""


def test_a_device_is_looked_at_after_each_new_connection() -> None:
    """What the client counts between two check_rebooted() calls includes a reboot seen
    when a command had to connect again, and the look's own command does not look."""
    dev = Device(["100.0 aaa", "150.0 aaa", "5.0 bbb", "6.0 bbb", "7.0 bbb"])
    try:
        dev.run(["true"])
        assert dev.check_rebooted() is False
        dev.lost = True         # the device went away (and rebooted)
        dev.run(["true"])       # connects again: the next command looks first
        dev.run(["true"])
        assert (dev.reboots, dev.conn.connects) == (1, 2)
        assert dev.check_rebooted() is True
        assert dev.check_rebooted() is False
        assert dev.commands == ["boot", "true", "boot", "true", "boot", "true", "boot", "boot"]
    finally:
        dev.close()


class Plain(ThisShell):
    """A kind that states no way of its own to signal a recorded process."""
    signal_recorded = Client.signal_recorded


def test_the_default_signal_to_a_recorded_process_checks_its_start_time() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        ticks = proc_start_time(child.pid)
        assert ticks is not None
        ex = Plain("host", None)
        ex.stop_recorded(ProcessId("host", child.pid, ticks + 1), grace=0.1)
        assert child.poll() is None, "a process with another start time was signalled"
        ex.stop_recorded(ProcessId("host", child.pid, ticks), grace=2.0)
        assert child.wait(5) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()
