"""Both directions at once (kinds/throughput_both.py): a trial of the pair fails if either
direction loses and is short if either generator was; each direction keeps its own."""

from __future__ import annotations

import pytest

from hoplab.analysis.ndr import Trial
from hoplab.kinds.procedure import Context, Running
from hoplab.kinds.throughput_both import Both, worse
from hoplab.tools.hoplab_gen import Sent


def test_the_pair_takes_the_larger_loss_and_the_lower_achieved_rate():
    up, down = Trial(1000, 2000, 2000, 2.0), Trial(1000, 1900, 1881, 2.0)
    pair = worse([up, down], 1000)
    assert pair.loss_ratio == pytest.approx(0.01) and pair.achieved_fps == pytest.approx(950)
    assert pair.short_of(0.005) and not worse([up, up], 1000).short_of(0.005)
    # Stalled as the slower direction was: 100 ms of its 2 s, 100 frames short of 2000.
    stalled = Trial(1000, 1900, 1900, 2.0, 0.1)
    pair = worse([Trial(1000, 2000, 1980, 2.0), stalled], 1000)
    assert pair.stalled(0.005) and pair.stalled_s / 2.0 == pytest.approx(0.05 * 2000 / 1900)
    assert not worse([up, down], 1000).stalled(0.005)


class _Proc:
    started = 0.0

    def poll(self) -> int | None:
        return 0

    def output(self) -> bytes:
        return b""

    def stop(self, grace: float = 2.0) -> None:
        pass


class _Way:
    """A direction whose path forwards `capacity` frames/s: its counter advances by what
    a trial at a rate passes."""

    def __init__(self, key: str, capacity: float) -> None:
        self.key, self.capacity = key, capacity
        self.times: list[float] = []
        self.started: list[float | None] = []
        self.count, self.pending = 0, (0, 1.0)

    def counted(self) -> int:
        return self.count

    def start(self, fps: float | None, seconds: float, frames: int | None = None
              ) -> list[Running]:
        assert fps is not None
        self.started.append(fps)
        self.pending = (round(fps * seconds), seconds)
        return [_Proc()]

    def collect(self, procs: list[Running], seconds: float) -> Sent:
        n, took = self.pending
        self.count += min(n, round(self.capacity * took))
        return Sent(n, took)


def test_both_start_before_either_is_collected_and_keep_their_own_trials():
    ticks: list[float] = []
    ctx = Context(test=None, plan=None, nodes={}, launcher=None,  # type: ignore[arg-type]
                  t0=0.0, tick=ticks.append, listening=lambda *a: None)
    up, down = _Way("1518 up", 5000), _Way("1518 down", 4000)
    both = Both(ctx, [up, down])
    pair = both.trial(4500, 1.0, 0.0)
    assert up.started == down.started == [4500]
    assert [t.loss_ratio for t in both.per_way[0]] == [0.0]
    assert both.per_way[1][0].loss_ratio == pytest.approx(500 / 4500)
    assert pair.loss_ratio == pytest.approx(500 / 4500) and len(up.times) == 1
    assert both.trial(3900, 1.0, 0.0).loss_ratio == 0.0
