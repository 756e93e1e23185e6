"""A command that could not reach its node says so (NotReached): nothing ran there, so a
caller need not wait for what it asked (hoplab.lab.vm.power). Still a timeout to callers
that wait (NotReachedInTime is a TimeoutError). Servers on loopback: one that accepts and
never speaks (a guest whose SSH server is not up yet behind a live port), and a port
nothing listens on."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import closing

import pytest

from hoplab.nodes.executor import NotReached, NotReachedInTime
from hoplab.nodes.ssh_exec import SshExecutor
from hoplab.nodes.ssh_target import SshTarget


@pytest.fixture
def mute() -> Iterator[int]:
    """A port that accepts connections and never sends an SSH banner."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        yield srv.getsockname()[1]


def _executor(port: int, connect_timeout: float = 10.0) -> SshExecutor:
    ex = SshExecutor(SshTarget("r1", "127.0.0.1", port=port, known_hosts="/dev/null",
                               connect_timeout=connect_timeout))
    ex.ignore_reboots()
    return ex


def test_a_connection_still_being_made_when_time_runs_out(mute: int) -> None:
    with closing(_executor(mute)) as ex, pytest.raises(NotReachedInTime, match=re.escape(
            "node r1: cannot connect to 127.0.0.1 within 0.3 s")):
        ex.run(["true"], timeout=0.3)


def test_a_port_nothing_listens_on() -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
    with closing(_executor(port, connect_timeout=0.5)) as ex, pytest.raises(
            NotReached, match=re.escape("node r1: cannot connect to 127.0.0.1")):
        ex.run(["true"], timeout=30)
