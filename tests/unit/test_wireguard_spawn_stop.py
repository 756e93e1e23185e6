"""A stop signal that lands while `start_many` starts userspace daemons (lab up turns it
into a KeyboardInterrupt at any bytecode, also inside subprocess.Popen after its fork)
stops every daemon started so far, including the one whose start it landed in, and the
record has that one too: CI saw one left running in a namespace that was then deleted
(tests/lab/test_runs_signals.py, the pestered WireGuard lab). Signals are raised in this
process with signal.raise_signal, whose handler runs before it returns."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from hoplab.lab import wireguard
from hoplab.lab.signals import terminate_as_interrupt
from hoplab.lab.wireguard import userspace

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Daemon:
    def __init__(self, pid: int) -> None:
        self.pid = pid


@pytest.fixture(autouse=True)
def dispositions() -> Iterator[None]:
    mine = {sig: signal.getsignal(sig) for sig in STOPS}
    yield
    for sig, handler in mine.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def test_a_daemon_started_as_the_stop_lands_is_stopped(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    started: list[int] = []
    stopped: list[tuple[str, int | None]] = []
    recorded: list[tuple[str, int]] = []

    def spawn(iface: object) -> _Daemon:
        pid = 90_000 + len(started)
        started.append(pid)
        if len(started) == 2:
            # After the daemon runs, before spawn returns (as inside Popen after its fork).
            signal.raise_signal(signal.SIGHUP)
        userspace._CHILDREN[pid] = _Daemon(pid)  # type: ignore[assignment]
        return _Daemon(pid)

    def stop(iface: wireguard.WgInterface, pid: int | None) -> None:
        stopped.append((iface.ifname, pid))
        if pid is not None:
            userspace._CHILDREN.pop(pid, None)

    monkeypatch.setattr(wireguard, "validate", lambda iface: None)
    monkeypatch.setattr(userspace, "spawn", spawn)
    monkeypatch.setattr(wireguard, "stop", stop)
    ifaces = [wireguard.WgInterface.__new__(wireguard.WgInterface) for _ in range(3)]
    for i, iface in enumerate(ifaces):
        object.__setattr__(iface, "netns", f"ns{i}")
        object.__setattr__(iface, "ifname", f"wg{i}")
    with pytest.raises(KeyboardInterrupt, match="signal 1"), \
            terminate_as_interrupt(shield_after_first=True):
        wireguard.start_many(ifaces, "userspace",
                             on_started=lambda iface, pid: recorded.append((iface.ifname, pid)))
    assert sorted(stopped) == [("wg0", 90_000), ("wg1", 90_001)]
    assert recorded == [("wg0", 90_000), ("wg1", 90_001)]
    assert not userspace.children() & set(started)
