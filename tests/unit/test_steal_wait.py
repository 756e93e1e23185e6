"""hoplab.kinds.stolen_cpu: stolen CPU read from /proc/stat, and the wait for a quiet second
that a trial the generator stalled in is followed by (on a clock the test controls)."""

from __future__ import annotations

import os

import pytest

from hoplab.kinds import stolen_cpu as steal


class _Machine:
    """A clock and a steal counter: `rates` is the share of a core stolen in each second."""

    def __init__(self, rates: list[float]) -> None:
        self.t, self.rates = 0.0, rates

    def clock(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s

    def stolen(self) -> float:
        whole = int(self.t)
        done = sum(self.rates[:whole]) if whole <= len(self.rates) else sum(self.rates)
        now = self.rates[whole] if whole < len(self.rates) else 0.0
        return done + now * (self.t - whole)


def test_steal_is_the_eighth_figure_of_the_cpu_line() -> None:
    line = "cpu  945859 13297 282758 1020910 17850 0 71491 54519 0 0\n"
    assert steal.stolen_s(line) == 54519 / os.sysconf("SC_CLK_TCK")
    assert steal.stolen_s("cpu  1 2 3 4\n") == 0.0
    assert steal.share(0.5, 10.0) == 0.05 and steal.share(1.0, 0.0) == 0.0


def test_the_wait_ends_with_the_first_quiet_second() -> None:
    m = _Machine([0.3, 0.2, 0.1, 0.01, 0.0])
    waited = steal.wait_quiet(15, read=m.stolen, clock=m.clock, sleep=m.sleep)
    assert waited == pytest.approx(4.0)
    # A machine that counts no steal: the first second.
    m = _Machine([])
    assert steal.wait_quiet(15, read=m.stolen, clock=m.clock, sleep=m.sleep) == 1.0


def test_no_quiet_second_within_the_limit_is_none() -> None:
    m = _Machine([0.05] * 30)
    assert steal.wait_quiet(15, read=m.stolen, clock=m.clock, sleep=m.sleep) is None
    assert m.t == pytest.approx(15.0)


def test_a_stretch_of_quiet_seconds_skips_a_lone_one_inside_a_burst() -> None:
    # A quiet second between heavy ones (as a fresh-clone run's steal came: one in
    # bursts of 2 to 10 s); the stretch starts at second 5.
    m = _Machine([0.9, 0.0, 0.8, 0.85, 0.3, 0.01, 0.0, 0.0])
    assert steal.wait_quiet(30, read=m.stolen, clock=m.clock, sleep=m.sleep) == 2.0
    m = _Machine([0.9, 0.0, 0.8, 0.85, 0.3, 0.01, 0.0, 0.0])
    waited = steal.wait_quiet(30, seconds=2, read=m.stolen, clock=m.clock, sleep=m.sleep)
    assert waited == pytest.approx(7.0)
    # Never two in a row within the limit.
    m = _Machine([0.0, 0.5] * 20)
    assert steal.wait_quiet(30, seconds=2, read=m.stolen, clock=m.clock, sleep=m.sleep) is None
