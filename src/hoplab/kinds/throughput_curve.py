"""RFC 2544's other figures of a frame size, options of the throughput kind.

Frame loss rate (section 26.3): trials at 100 %, 90 %, ... of the maximum rate, until two
in a row lose nothing; the loss of each, as a curve. The maximum is the generator's
ceiling as the search left it (on veth there is no line rate to take instead).

Back-to-back frames (section 26.4): the longest burst, sent as fast as the generator
sends, that the path forwards whole. Behind a rate of R frames/s, a queue of Q frames and
a token bucket of B frames, a burst at G frames/s loses nothing while
N <= (Q + B) / (1 - R / G): the search bisects N, guided by what a failed burst passed.
"""

from __future__ import annotations

from typing import Protocol

from hoplab.analysis.ndr import Trial
from hoplab.record import Metric

STEPS = tuple(range(100, 0, -10))
# RFC 2544 section 26.4: a burst of at most two seconds at the maximum rate.
BURST_S = 2.0


class Runner(Protocol):
    def trial(self, fps: float, seconds: float, drain_s: float) -> Trial: ...

    def burst(self, frames: int, drain_s: float) -> Trial: ...


def loss_curve(run: Runner, max_fps: float, trial_s: float, drain_s: float
               ) -> list[tuple[int, Trial]]:
    """(percent of the maximum, its trial) from 100 % down, until two clean in a row."""
    out: list[tuple[int, Trial]] = []
    for pct in STEPS:
        out.append((pct, run.trial(max_fps * pct / 100, trial_s, drain_s)))
        if len(out) >= 2 and all(t.loss_ratio == 0 for _, t in out[-2:]):
            break
    return out


def curve_metrics(curve: list[tuple[int, Trial]], key: str) -> list[Metric]:
    out: list[Metric] = []
    for pct, t in curve:
        out += [Metric("frame_loss", 100 * t.loss_ratio, "%", key=f"{key} {pct}%"),
                Metric("frame_loss_offered_fps", t.achieved_fps, "frames/s",
                       key=f"{key} {pct}%")]
    return out


def back_to_back(run: Runner, max_frames: int, drain_s: float, precision: float
                 ) -> tuple[int, Trial | None]:
    """The longest burst (frames) forwarded whole, to `precision` of it, and the burst
    that decided it (None when even one frame was lost)."""
    lo, best, hi = 0, None, None
    n = max(1, max_frames)
    while True:
        t = run.burst(n, drain_s)
        if t.received >= t.offered:
            lo, best = t.offered, t
        else:
            hi = n
        if hi is None or hi - lo <= max(1.0, precision * lo):
            return lo, best
        # What a failed burst passed is what the path holds: try it first.
        passed = t.received if t.received < t.offered else 0
        n = passed if lo < passed < hi else (lo + hi) // 2
        if n <= lo:
            n = lo + 1


def b2b_metrics(frames: int, decided: Trial | None, key: str) -> list[Metric]:
    out = [Metric("back_to_back_frames", float(frames), "frames", key=key)]
    if decided is not None:
        out.append(Metric("back_to_back_fps", decided.achieved_fps, "frames/s", key=key))
    return out
