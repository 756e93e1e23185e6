"""The search for RFC 2544 throughput: the highest offered rate whose loss is within a
target, to a precision, by bisection over trials (RFC 2544 section 26.1).

Pure: the kind that runs trials asks `next_rate()`, runs a trial at that rate, and hands
the frames offered and received to `record()`. Loss is frames offered minus frames
received over frames offered (RFC 2544 section 26.3), hoplab's one definition of loss.

Every trial informs every loss target: a trial with 0.3 % loss passes a 0.5 % target and
fails a 0 % one. Searching for several targets (an NDR and a PDR) reuses each other's
trials, so the second search starts from bounds the first already found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hoplab import metrics


@dataclass(frozen=True)
class Trial:
    rate_fps: float
    offered: int
    received: int

    @property
    def loss_ratio(self) -> float:
        """Frames offered minus frames received over frames offered: hoplab's one
        definition (hoplab.metrics.loss_ratio; duplicates never make it negative)."""
        return metrics.loss_ratio(self.offered, self.received)


@dataclass
class Search:
    """One frame size's search. `ceiling_fps` is the highest rate worth offering: the
    generator's own measured rate (or a known line rate, if lower)."""

    ceiling_fps: float
    targets: tuple[float, ...]          # loss ratios, e.g. (0.0, 0.005)
    precision: float                    # relative: stop when hi - lo <= precision * lo
    floor_fps: float = 1.0              # below this, the answer is "nothing passes"
    trials: list[Trial] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.ceiling_fps <= 0:
            raise ValueError(f"a ceiling is above 0 frames/s, not {self.ceiling_fps}")
        if not self.targets or any(not 0 <= t < 1 for t in self.targets):
            raise ValueError(f"loss targets are within [0, 1): {self.targets}")
        if not 0 < self.precision < 1:
            raise ValueError(f"precision is a fraction within (0, 1), not {self.precision}")

    def record(self, trial: Trial) -> None:
        self.trials.append(trial)

    def bounds(self, target: float) -> tuple[float, float | None]:
        """(highest rate that passed, lowest rate that failed above it or None)."""
        passed = [t.rate_fps for t in self.trials if t.loss_ratio <= target]
        lo = max(passed, default=0.0)
        failed = [t.rate_fps for t in self.trials
                  if t.loss_ratio > target and t.rate_fps > lo]
        return lo, min(failed, default=None)

    def _open(self, target: float) -> float | None:
        """The next rate for one target, or None when its answer is known."""
        lo, hi = self.bounds(target)
        if hi is None:
            # Nothing failed above lo: the ceiling itself is next, unless it passed.
            return None if lo >= self.ceiling_fps else self.ceiling_fps
        if hi <= self.floor_fps:
            return None
        if lo > 0 and hi - lo <= self.precision * lo:
            return None
        if lo == 0 and hi <= self.floor_fps * 2:
            return None
        guided = self._guided(lo, hi, target)
        if guided is not None:
            return guided
        return (lo + hi) / 2 if lo > 0 else max(self.floor_fps, hi / 2)

    def _tried(self, rate: float) -> bool:
        return any(abs(t.rate_fps - rate) <= 1e-6 * rate for t in self.trials)

    def _guided(self, lo: float, hi: float, target: float) -> float | None:
        """A rate the failed trials point at, before bisecting: a trial over the path's
        rate forwards about that rate (what arrived over the trial), so a path far below
        the generator is bracketed in a few trials, not log2(ceiling / precision). First
        the forwarding rate of the lowest failure, then one step of the precision above
        the highest pass."""
        failed = min((t for t in self.trials if t.loss_ratio > target and t.rate_fps >= hi),
                     key=lambda t: t.rate_fps)
        forwarded = failed.rate_fps * (1 - failed.loss_ratio)
        if lo < forwarded < hi and not self._tried(forwarded):
            return forwarded
        step = lo * (1 + self.precision)
        if lo > 0 and step < hi and not self._tried(step):
            return step
        return None

    def next_rate(self) -> float | None:
        """The rate of the next trial, or None when every target is answered."""
        for target in self.targets:
            rate = self._open(target)
            if rate is not None:
                return rate
        return None

    def answer(self, target: float) -> float:
        """The highest rate with loss within `target` (0 when none passed)."""
        return self.bounds(target)[0]

    def limited_by_generator(self, target: float) -> bool:
        """True when the answer is the ceiling: the path may forward more than offered."""
        return self.answer(target) >= self.ceiling_fps
