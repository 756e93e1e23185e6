"""A stop that lands while `start_many` starts userspace daemons (lab up turns a signal
into an exception at any point) stops every daemon started so far, including one whose
start had not returned to start_many yet: CI saw one left running in a namespace that
was then deleted (tests/lab/test_runs_signals.py, the pestered WireGuard lab)."""

from __future__ import annotations

import pytest

from hoplab.lab import wireguard
from hoplab.lab.wireguard import userspace


class _Daemon:
    def __init__(self, pid: int) -> None:
        self.pid = pid


def test_a_daemon_started_as_the_stop_lands_is_stopped(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    started: list[int] = []
    stopped: list[tuple[str, int | None]] = []

    def spawn(iface: object) -> _Daemon:
        pid = 90_000 + len(started)
        started.append(pid)
        userspace._CHILDREN[pid] = _Daemon(pid)  # type: ignore[assignment]
        if len(started) == 2:
            raise KeyboardInterrupt  # after the daemon runs, before spawn returns
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
    with pytest.raises(KeyboardInterrupt):
        wireguard.start_many(ifaces, "userspace")
    assert sorted(stopped) == [("wg0", 90_000), ("wg1", 90_001)]
    assert not userspace.children() & set(started)
