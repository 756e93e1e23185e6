"""Both directions at once (RFC 2544's bidirectional throughput, `direction = "both"`):
every trial offers the trial's rate in each direction at the same time, and fails if
either direction loses. Each direction keeps its own trials, so its figures (the rate
it achieved, its loss) are given beside the pair's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from hoplab.analysis.ndr import Trial
from hoplab.kinds.procedure import Context, Running
from hoplab.tools.hoplab_gen import Sent


class Way(Protocol):
    """One direction's generator and counter (kinds.throughput._Trials)."""

    key: str
    times: list[float]

    def counted(self) -> int: ...

    def start(self, fps: float | None, seconds: float, frames: int | None = None
              ) -> list[Running]: ...

    def collect(self, procs: list[Running], seconds: float) -> Sent: ...


def worse(trials: Sequence[Trial], fps: float) -> Trial:
    """The pair's trial: the larger loss of the two, the lower achieved rate (a trial
    is short if either generator was, and stalled as the slower one was)."""
    worst = max(trials, key=lambda t: t.loss_ratio)
    slower = min(trials, key=lambda t: t.achieved_fps)
    slow = slower.achieved_fps
    return Trial(fps, worst.offered, worst.received,
                 worst.offered / slow if slow > 0 else None,
                 slower.stalled_s * worst.offered / slower.offered if slower.offered else 0.0)


class Both:
    def __init__(self, ctx: Context, ways: Sequence[Way]) -> None:
        self.ctx, self.ways = ctx, list(ways)
        self.per_way: list[list[Trial]] = [[] for _ in self.ways]

    def _run(self, fps: float | None, seconds: float, frames: int | None,
             drain_s: float) -> list[Trial]:
        now = time.time() - self.ctx.t0
        for w in self.ways:
            w.times.append(now)
        before = [w.counted() for w in self.ways]
        procs = [w.start(fps, seconds, frames) for w in self.ways]
        sent = [w.collect(p, seconds) for w, p in zip(self.ways, procs, strict=True)]
        time.sleep(drain_s)  # RFC 2544 section 23: frames that arrive late still count
        self.ctx.tick(time.time() - self.ctx.t0)
        got = [w.counted() - b for w, b in zip(self.ways, before, strict=True)]
        out = [Trial(fps if fps is not None else n / took, n, g, took, stalled)
               for (n, took, stalled), g in zip(sent, got, strict=True)]
        for mine, t in zip(self.per_way, out, strict=True):
            mine.append(t)
        return out

    def trial(self, fps: float, seconds: float, drain_s: float) -> Trial:
        return worse(self._run(fps, seconds, None, drain_s), fps)

    def burst(self, frames: int, drain_s: float) -> Trial:
        each = self._run(None, 0.0, frames, drain_s)
        return worse(each, min(t.rate_fps for t in each))
