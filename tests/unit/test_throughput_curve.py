"""RFC 2544's frame loss curve and back-to-back frames (kinds/throughput_curve.py) against
a modelled path: a shaper of R frames/s with a token bucket of B frames and a queue of Q
frames, whose answers are computed."""

from __future__ import annotations

import pytest

from hoplab.analysis.ndr import Trial
from hoplab.kinds import throughput_curve as tc


class Path:
    """Forwards R frames/s; holds B + Q frames beyond that; the generator sends bursts
    at G frames/s."""

    def __init__(self, r: float, b: int, q: int, g: float) -> None:
        self.r, self.b, self.q, self.g = r, b, q, g
        self.runs: list[float] = []

    def trial(self, fps: float, seconds: float, drain_s: float) -> Trial:
        self.runs.append(fps)
        sent = round(fps * seconds)
        return Trial(fps, sent, min(sent, round(self.r * seconds) + self.b + self.q), seconds)

    def burst(self, frames: int, drain_s: float) -> Trial:
        took = frames / self.g
        passed = min(frames, int(self.b + self.q + self.r * took))
        return Trial(self.g, frames, passed, took)


def test_the_loss_curve_steps_down_until_two_trials_lose_nothing():
    path = Path(r=4_128, b=44, q=20, g=0)
    curve = tc.loss_curve(path, 10_000, 10.0, 0.5)
    assert [pct for pct, _ in curve] == [100, 90, 80, 70, 60, 50, 40, 30]
    for pct, t in curve:
        held = min(1.0, (4_128 * 10 + 64) / (10_000 * pct / 100 * 10))
        assert t.loss_ratio == pytest.approx(1 - held, abs=1e-4), pct
    metrics = {m.key: m.value for m in tc.curve_metrics(curve, "1518") if m.name == "frame_loss"}
    assert metrics["1518 100%"] == pytest.approx(100 * (1 - 41_344 / 100_000), abs=0.01)
    assert metrics["1518 30%"] == 0.0


def test_a_path_faster_than_the_maximum_is_two_trials():
    assert len(tc.loss_curve(Path(r=1e9, b=0, q=0, g=0), 10_000, 1.0, 0.0)) == 2


@pytest.mark.parametrize(("r", "b", "q", "g"), [(825.6, 44, 20, 150_000.0),
                                                (4_128.0, 44, 200, 80_000.0),
                                                (20_833.0, 1117, 1000, 300_000.0)])
def test_back_to_back_is_what_the_queue_and_bucket_absorb(r, b, q, g):
    want = (q + b) / (1 - r / g)  # N <= Q + B + R * N / G
    frames, decided = tc.back_to_back(Path(r, b, q, g), round(g * tc.BURST_S), 0.0, 0.0)
    assert want - 1 <= frames <= want
    assert decided is not None and decided.offered == frames and decided.loss_ratio == 0
    got = {m.name: m.value for m in tc.b2b_metrics(frames, decided, "64")}
    assert got == {"back_to_back_frames": frames, "back_to_back_fps": g}


def test_back_to_back_when_nothing_passes_whole():
    frames, decided = tc.back_to_back(Path(r=0, b=0, q=0, g=1000.0), 2000, 0.0, 0.0)
    assert (frames, decided) == (0, None)
