"""Taking a lab's VMs down (hoplab.lab.vm.power): a guest that was asked to power off is
given GRACE_S to do so; one that was never reached (killed while it booted, its host key
refused) is not waited for: its QEMU is killed at once. A stand-in QEMU (`sleep`, a
process of this test) and executors that answer as a guest would; the grace is counted
on a clock the test controls."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hoplab.errors import HoplabError
from hoplab.lab.state import LabState
from hoplab.lab.vm import power
from hoplab.nodes.executor import Completed, ExecutorError, NotReached, NotReachedInTime
from hoplab.nodes.procs import Proc, proc_start_time


class Clock:
    """time.monotonic and time.sleep for power: a sleep moves the clock on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s
        self.slept += s


class Guest:
    """A VM's executor as power_off uses it: run() answers with `outcome`."""

    def __init__(self, outcome: Exception | None) -> None:
        self.outcome = outcome
        self.asked: list[Sequence[str]] = []
        self.watching = True

    def ignore_reboots(self) -> None:
        self.watching = False

    def run(self, argv: Sequence[str], **_: Any) -> Completed:
        assert not self.watching, "the power-off asked after a look for a reboot"
        self.asked.append(argv)
        if self.outcome is not None:
            raise self.outcome
        return Completed(tuple(argv), 0, "", "")


@pytest.fixture
def qemu() -> Iterator[Proc]:
    """A process recorded as r1's QEMU, which no power-off ends: only a kill."""
    proc = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
    start = proc_start_time(proc.pid)
    assert start is not None
    try:
        yield Proc(proc.pid, start, ["qemu-system-x86_64"], power.qemu_node("r1"), "qemu")
    finally:
        proc.kill()
        proc.wait()


def _down(qemu: Proc, guest: Guest, monkeypatch: pytest.MonkeyPatch,
          tmp_path: Path) -> Clock:
    clock = Clock()
    monkeypatch.setattr(power, "time", clock)
    monkeypatch.setattr(LabState, "rundir", property(lambda _: tmp_path))
    state = LabState(name="t-power", source="lab.toml", processes=[qemu])
    assert power.power_off(state, {"r1": guest}) == []    # type: ignore[dict-item]
    assert guest.asked == [["sh", "-c", "echo o > /proc/sysrq-trigger"]]
    assert proc_start_time(qemu.pid) != qemu.start, "its QEMU was not killed"
    return clock


@pytest.mark.parametrize("outcome", [None, ExecutorError("connection lost"),
                                     TimeoutError("no answer within 3 s")])
def test_an_asked_guest_is_given_the_grace_then_killed(
        outcome: Exception | None, qemu: Proc, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    clock = _down(qemu, Guest(outcome), monkeypatch, tmp_path)
    assert power.GRACE_S <= clock.slept <= power.GRACE_S + 0.1


@pytest.mark.parametrize("outcome", [NotReached("cannot connect to 10.0.0.1: refused"),
                                     NotReachedInTime("cannot connect within 3 s")])
def test_a_guest_never_reached_is_killed_at_once(
        outcome: HoplabError, qemu: Proc, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    clock = _down(qemu, Guest(outcome), monkeypatch, tmp_path)
    assert clock.slept == 0
