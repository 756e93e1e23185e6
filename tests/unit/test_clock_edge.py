"""The seconds' edge of a node whose clock has seconds only: an edge whose round trips
waited (a busy machine) gives a wide bound, so the next seconds' edges are read too, within
the budget, and the narrowest is kept. A scripted clock: this side's time advances by
each exchange's round trip; the node's clock is this side's plus a known offset."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest

from hoplab.nodes import clock
from hoplab.nodes.fake import FakeChannel
from hoplab.nodes.netns_exec import NetnsExecutor

OFFSET = 0.3       # the node's clock minus this machine's


class Scripted:
    """This side's clock, advanced by each exchange: half its round trip before the node
    reads its clock, half after."""

    def __init__(self, start: float, rtts: Iterator[float]) -> None:
        self.now = start
        self.rtts = rtts

    def time(self) -> float:
        return self.now

    def answer(self, _line: str) -> list[str]:
        rtt = next(self.rtts)
        self.now += rtt / 2
        seen = int(self.now + OFFSET)
        self.now += rtt / 2
        return [str(seen), clock.END]


def edge(monkeypatch: pytest.MonkeyPatch, rtts: Iterator[float],
         start: float = 1000.0) -> clock.ClockOffset:
    t = Scripted(start, rtts)
    # The time module the clock reads (the one module: patched for this test only).
    monkeypatch.setattr(time, "time", t.time)
    monkeypatch.setattr(time, "monotonic", t.time)
    return clock._edge("r1", FakeChannel(t.answer), 5.0)


def rtts(slow_at: set[int], fast: float = 0.001, slow: float = 0.080) -> Iterator[float]:
    """1 ms round trips; 80 ms ones at the exchanges numbered in `slow_at`."""
    n = 0
    while True:
        yield slow if n in slow_at else fast
        n += 1


def test_a_quiet_edge_is_taken_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    got = edge(monkeypatch, rtts(set()))
    # Starts at x.3 on the node: the edge after 700 ms, 700 exchanges of 1 ms.
    assert got.exchanges == 701
    assert abs(got.offset_s - OFFSET) <= got.uncertainty_s
    # Two exchanges (2 ms) and a tick (10 ms): a half-width of 6 ms.
    assert got.uncertainty_s == pytest.approx(0.006)


def test_an_edge_that_waited_is_followed_by_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    # The exchange that sees the first edge took 80 ms: a half-width of 45.5 ms then;
    # the second edge, 1,000 exchanges later, is quiet.
    got = edge(monkeypatch, rtts({699}))
    assert abs(got.offset_s - OFFSET) <= got.uncertainty_s
    assert got.uncertainty_s == pytest.approx(0.006)
    assert got.exchanges > 1000


def test_where_every_round_trip_is_slow_the_first_edge_is_taken(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 80 ms each (a slow link): nothing narrower can come, so no second is waited for.
    got = edge(monkeypatch, rtts(set(range(10_000))))
    assert abs(got.offset_s - OFFSET) <= got.uncertainty_s
    assert got.uncertainty_s == pytest.approx((0.160 + 0.010) / 2)
    assert got.exchanges < 20


def test_an_edge_in_the_first_exchanges_is_not_taken_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The node's second turns at the second exchange, while round trips still take 80 ms
    # (its best round trip then says nothing of the machine's); the next is quiet.
    got = edge(monkeypatch, rtts({0, 1, 2, 3}), start=999.6)
    assert abs(got.offset_s - OFFSET) <= got.uncertainty_s
    assert got.uncertainty_s == pytest.approx(0.006)


# This machine's shells, as a node's: bash answers from $EPOCHREALTIME (no process per
# exchange), and date +%s.%N where it is asked for. The node's clock is this one's.
@pytest.mark.parametrize("method", ["epochrealtime", "date-ns"])
def test_a_node_with_bash_is_read_without_a_process_per_exchange(method: str) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    ex = NetnsExecutor("here", None)
    if method == "epochrealtime":
        assert clock._method(ex) == "epochrealtime"
    got = clock.estimate(ex, method=None if method == "epochrealtime" else method)
    assert got.method == method and got.exchanges == 16
    assert abs(got.offset_s) <= got.uncertainty_s < 0.05, got
