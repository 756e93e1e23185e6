"""The search for RFC 2544 throughput: the highest offered rate whose loss is within a
target, to a precision, by bisection over trials (RFC 2544 section 26.1).

Pure: the kind that runs trials asks `next_rate()`, runs a trial at that rate, and hands
the frames offered and received to `record()`. Loss is frames offered minus frames
received over frames offered (RFC 2544 section 26.3), hoplab's one definition of loss.

Every trial informs every loss target: a trial with 0.3 % loss passes a 0.5 % target and
fails a 0 % one. Searching for several targets (an NDR and a PDR) reuses each other's
trials, so the second search starts from bounds the first already found.

MLRsearch's phases (draft-ietf-bmwg-mlrsearch; FD.io CSIT): short trials find coarse
bounds cheaply, then each phase lengthens the trials and narrows the width, starting
from the previous phase's bounds (`phases`, and `Search.hints`). Only the last phase's
trials, at the full trial length, decide the answer: a short trial overstates a path
by what its queues hold. bench/ndr_search.py measures it against a single phase.

A trial's loss is that trial's: no trial is repeated to pick the better. What is checked
is the generator's own record: a trial whose achieved rate (frames sent over the
measured sending time) falls short of the rate asked by more than the search's precision
did not test the rate asked. Its generator never sent faster than asked (a late batch is
caught up within a lag of ten frames, as in every trial; later than that its schedule
starts again, with no burst), it only sent less. So a short trial is evidence all the
same (`evidence`): one that lost frames failed at the rate asked (less would not have
passed it), and one that lost none passed at the rate it achieved (a smoother stream of
that rate would too). Only a short trial that tells nothing new is no evidence
(`invalid`): a pass no higher than one already seen, a loss between two targets, or a
stall; `next_rate()` asks for the same rate again. Before this, every short trial was
repeated, and three in a row at one rate were taken for a generator that cannot pace it:
with the generator 0.5 % short on average (a lab's forwarding on its CPU), 1 % of
searches of 64-byte frames ended more than 1 % low (2.8 % at worst), and 8 % of them
with 0.8 % (12.5 % at worst); now none, in fewer trials (bench/ndr_short.py).

Short is of two kinds, told apart by the generator's record of its stalls (hoplab-gen's
`stalled`: time it went unrun for longer than the lag it catches up). Short mostly by
stalls (`Trial.stalled`), the machine took the generator's CPU (and maybe the path's:
its loss may be the machine's): repeated, never evidence and never a ceiling. Otherwise
the generator may not pace that rate: a trial short at the ceiling
brings the ceiling down to what it achieved less the precision (the first, where the
ceiling measured unpaced meets pacing, is not counted); so do MAX_REPEATS short trials
in a row at one rate; neither brings it below a rate a valid trial kept. An answer at
the ceiling says it is the generator's. More than MAX_INVALID short trials in one
search is a machine too busy to measure on (GeneratorShort). Answers are achieved rates.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hoplab import metrics
from hoplab.errors import HoplabError

# Short trials in a row at one rate before the ceiling comes down to what was achieved.
MAX_REPEATS = 3
# Short trials in one search before it gives up.
MAX_INVALID = 20


class GeneratorShort(HoplabError):
    """The generator fell short of the rates asked too often for the search to go on."""


@dataclass(frozen=True)
class Trial:
    rate_fps: float                     # asked
    offered: int
    received: int
    seconds: float | None = None        # the generator's measured sending time
    stalled_s: float = 0.0              # of which, lost in stalls (hoplab-gen's record)

    @property
    def achieved_fps(self) -> float:
        """Frames sent over the measured sending time (the asked rate when not measured)."""
        return self.offered / self.seconds if self.seconds else self.rate_fps

    def short_of(self, precision: float) -> bool:
        """True when the generator sent slower than asked by more than `precision`."""
        return self.achieved_fps < self.rate_fps * (1 - precision)

    def stalled(self, precision: float) -> bool:
        """Short (short_of), and by stalls for at least half the frames it fell short by:
        the machine took the generator's CPU (a pace it cannot keep falls behind a batch
        at a time, never in one stall longer than the lag it catches up)."""
        if not self.short_of(precision) or not self.seconds:
            return False
        shortfall = self.rate_fps * self.seconds - self.offered
        return self.stalled_s * self.rate_fps >= shortfall / 2

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
    # Rates to try first, in order, while each still lies between the bounds: a
    # previous phase's bounds (MLRsearch).
    hints: tuple[float, ...] = ()
    # Trials the generator fell short in (Trial.short_of) that are evidence all the same:
    # a lossy one as it was (failed at the rate asked), a lossless one as asked at the
    # rate it achieved (passed there).
    evidence: list[Trial] = field(default_factory=list)
    # Trials the generator fell short in that tell nothing: kept, repeated.
    invalid: list[Trial] = field(default_factory=list)
    # Every trial in the order run, the invalid ones included.
    history: list[Trial] = field(default_factory=list)
    # The highest rate a valid trial of an earlier phase kept: a ceiling never comes
    # below it either (each MLRsearch phase is a new Search, its own trials none yet).
    proven_fps: float = 0.0
    _paced: bool = field(default=False, repr=False)   # the ceiling came down to a trial's

    def __post_init__(self) -> None:
        if self.ceiling_fps <= 0:
            raise ValueError(f"a ceiling is above 0 frames/s, not {self.ceiling_fps}")
        if not self.targets or any(not 0 <= t < 1 for t in self.targets):
            raise ValueError(f"loss targets are within [0, 1): {self.targets}")
        if not 0 < self.precision < 1:
            raise ValueError(f"precision is a fraction within (0, 1), not {self.precision}")

    def record(self, trial: Trial) -> None:
        self.history.append(trial)
        if not trial.short_of(self.precision):
            self.trials.append(trial)
            return
        forwarded = trial.achieved_fps * (1 - trial.loss_ratio)
        if trial.loss_ratio > 0 and not self._tried(forwarded):
            # Not evidence, but where the path is: what it forwarded is the next rate to try.
            self.hints = (forwarded, *self.hints)
        stalled = trial.stalled(self.precision)
        if trial.rate_fps >= self.ceiling_fps and not stalled:
            # Short at the ceiling: the generator cannot pace that rate; what it achieved,
            # less the precision, is its ceiling. The first time is expected (the ceiling
            # was measured unpaced) and is not counted.
            self._lower_ceiling(trial.achieved_fps * (1 - self.precision))
            if not self._paced:
                self._paced = True
                return
        elif not stalled and self._as_evidence(trial):
            return
        self.invalid.append(trial)
        if len(self.invalid) > MAX_INVALID or self.ceiling_fps <= self.floor_fps:
            stalls = sum(t.stalled(self.precision) for t in self.invalid)
            raise GeneratorShort(
                f"the generator fell short of the rate asked (by more than the precision, "
                f"{100 * self.precision:g} %) in {len(self.invalid)} trials, {stalls} of "
                f"them by stalls (the machine took its CPU): the last sent "
                f"{trial.achieved_fps:.0f} of {trial.rate_fps:.0f} frames/s")
        recent = self.history[-MAX_REPEATS:]
        if trial.rate_fps < self.ceiling_fps and len(recent) == MAX_REPEATS and all(
                any(t is x for x in self.invalid) and not t.stalled(self.precision)
                and t.rate_fps == trial.rate_fps for t in recent):
            # It cannot send this rate here: the most it did send is its ceiling.
            self._lower_ceiling(max(t.achieved_fps for t in recent) * (1 - self.precision))

    def _as_evidence(self, trial: Trial) -> bool:
        """Keeps a short trial (below the ceiling, not stalled) as evidence where it is
        some: lossy for every target, a failure at the rate asked; lossless for every
        target and above a pass seen, a pass at the rate achieved."""
        if trial.loss_ratio > max(self.targets):
            self.evidence.append(trial)
            return True
        if trial.loss_ratio <= min(self.targets):
            passed = replace(trial, rate_fps=trial.achieved_fps)
            if any(passed.rate_fps > self.bounds(t)[0] for t in self.targets):
                self.evidence.append(passed)
                return True
        return False

    def _seen(self) -> list[Trial]:
        """The trials that are evidence: the valid ones and the short ones kept."""
        return [*self.trials, *self.evidence]

    def _lower_ceiling(self, to: float) -> None:
        """Bring the ceiling down to `to`, but never below a rate a valid trial kept: a
        generator that has paced a rate can pace it, and falling short below it is a
        stall of a busy machine, not a ceiling. Taken for one, each stall lowered the
        ceiling by what it cost, and the next trial at the ceiling stalled again: 22,000
        frames/s came down to 17,883 in 14 trials short by 1 to 2 %. Nor below what an
        earlier phase kept: a CI run with a busy loop stalled before any trial of a phase
        was valid, and its ceiling and NDR came to 3,165 frames/s where the path passes
        4,250."""
        kept = max((t.rate_fps for t in self.trials), default=0.0)
        self.ceiling_fps = min(self.ceiling_fps, max(to, kept, self.proven_fps))

    def bounds(self, target: float) -> tuple[float, float | None]:
        """(highest rate that passed, lowest rate that failed above it or None)."""
        seen = self._seen()
        passed = [t.rate_fps for t in seen if t.loss_ratio <= target]
        lo = max(passed, default=0.0)
        failed = [t.rate_fps for t in seen if t.loss_ratio > target and t.rate_fps > lo]
        return lo, min(failed, default=None)

    def _open(self, target: float) -> float | None:
        """The next rate for one target, or None when its answer is known."""
        lo, hi = self.bounds(target)
        if lo >= self.ceiling_fps:
            return None  # nothing higher can be offered
        if hi is None:
            # Nothing failed above lo: a hint above lo, else the ceiling itself, unless
            # only short trials lost frames up there: then a rate the generator keeps.
            hinted = self._hinted(lo, None)
            return self._below_short(lo, target) if hinted is None else hinted
        if hi <= self.floor_fps:
            return None
        if lo > 0 and hi - lo <= self.precision * lo:
            return None
        if lo == 0 and hi <= self.floor_fps * 2:
            return None
        hinted = self._hinted(lo, hi)
        if hinted is not None:
            return hinted
        guided = self._guided(lo, hi, target)
        if guided is not None:
            return guided
        return (lo + hi) / 2 if lo > 0 else max(self.floor_fps, hi / 2)

    def _below_short(self, lo: float, target: float) -> float:
        """With nothing valid failed above `lo`: the ceiling, or, where short trials lost
        frames above lo (a generator that cannot pace up there), a step of at most a
        quarter above lo towards the lowest of them: a failure the search can use."""
        lossy = [t.rate_fps for t in self.history
                 if t.short_of(self.precision) and t.loss_ratio > target and t.rate_fps > lo]
        if not lossy or lo <= 0:
            return self.ceiling_fps
        return min(self.ceiling_fps, (lo + min(lossy)) / 2, lo * 1.25)

    def _hinted(self, lo: float, hi: float | None) -> float | None:
        for rate in self.hints:
            inside = lo < rate <= self.ceiling_fps and (hi is None or rate < hi)
            if inside and rate > self.floor_fps and not self._tried(rate):
                return rate
        return None

    def _tried(self, rate: float) -> bool:
        return any(abs(t.rate_fps - rate) <= 1e-6 * rate for t in self._seen())

    def _guided(self, lo: float, hi: float, target: float) -> float | None:
        """A rate the failed trials point at, before bisecting: a trial over the path's
        rate forwards about that rate (what arrived over the trial), so a path far below
        the generator is bracketed in a few trials, not log2(ceiling / precision). First
        the forwarding rate of the lowest failure, then one step of the precision above
        the highest pass."""
        failed = min((t for t in self._seen() if t.loss_ratio > target and t.rate_fps >= hi),
                     key=lambda t: t.rate_fps)
        forwarded = failed.achieved_fps * (1 - failed.loss_ratio)   # received a second
        if lo < forwarded < hi and not self._tried(forwarded):
            return forwarded
        step = lo * (1 + self.precision)
        if lo > 0 and step < hi and not self._tried(step):
            return step
        return None

    def next_rate(self) -> float | None:
        """The rate of the next trial, or None when every target is answered. Never
        above the ceiling (which comes down when the generator cannot reach it)."""
        for target in self.targets:
            rate = self._open(target)
            if rate is not None:
                return min(rate, self.ceiling_fps)
        return None

    def answer(self, target: float) -> float:
        """The achieved rate of the highest trial with loss within `target` (0 when none
        passed): what was sent, not what was asked."""
        lo = self.bounds(target)[0]
        return max((t.achieved_fps for t in self._seen()
                    if t.rate_fps == lo and t.loss_ratio <= target), default=0.0)

    def limited_by_generator(self, target: float) -> bool:
        """True when the answer is the ceiling: the path may forward more than offered."""
        lo = self.bounds(target)[0]
        return lo > 0 and lo >= self.ceiling_fps


@dataclass(frozen=True)
class Phase:
    trial_s: float
    precision: float


def phases(trial_s: float, precision: float, *, shortest_s: float = 1.0,
           intermediate: int = 2) -> list[Phase]:
    """MLRsearch's phases: trials from `shortest_s` up to `trial_s` in geometric steps,
    the width doubling for each phase before the last (CSIT's defaults: 1 s first, two
    intermediate phases). One phase when the trials are already short."""
    if trial_s <= shortest_s:
        return [Phase(trial_s, precision)]
    steps = intermediate + 1
    out = [Phase(shortest_s * (trial_s / shortest_s) ** (i / steps),
                 min(0.5, precision * 2 ** (steps - i))) for i in range(steps)]
    return [*out, Phase(trial_s, precision)]


def bounds_hints(search: Search) -> tuple[float, ...]:
    """A finished phase's bounds, for the next: each target's pass, then its failure."""
    out: list[float] = []
    for target in search.targets:
        lo, hi = search.bounds(target)
        out += [r for r in (lo, hi) if r]
    return tuple(out)
