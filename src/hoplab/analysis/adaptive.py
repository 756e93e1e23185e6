"""Adaptive verdicts: different, same or unclear after each batch of repetitions.

Chromium's Pinpoint decides bisection steps this way: a p below a low threshold
(0.01) says "different"; a result that a change of the size of interest would
very likely have disproved says "same"; anything else is "unknown" and asks
for more repetitions, up to a cap. Unknown at the cap is an answer of its own
("cannot tell"), never a guess: with 7 bisection steps, a 5 % error per step
names the wrong commit 30 % of the time.

Here, for two sets of repetitions A and B of one metric, in the words of
analysis/verdicts.py (one definition with compare's):

- same: the (1 - 2 alpha) bootstrap interval of the change of B's median against
  A's (compare.py's, as `hoplab compare` prints it) lies inside +-bound: two
  one-sided tests at alpha, each rejecting a change of the bound. Medians, not
  means: a run slowed by something else on the machine must not decide. The
  bound comes from what is being decided; bisect takes half the measured step
  from good to bad, so "same as good" means "nearer good than bad, beyond the
  noise". This is checked first: a difference shown to be smaller than the bound
  is "same" even if the rank test sees it.
- different: the two-sided Mann-Whitney p of analysis/compare.py (the p `hoplab
  compare` reports) is below alpha (0.01). The exact rank test needs 5 vs 5
  repetitions before p can fall below 0.01 (its smallest p is 2 / C(10, 5)).
- unclear (no clear difference): neither; the power figures (analysis/power.py) say
  what the current repetitions can detect and how many a change of the bound needs.

verdicts.shows_same is the "same" test, compare's too. classify turns the two
verdicts of a commit (against good, against bad) into git bisect's answer: 0 like
good, 1 like bad, 125 cannot tell. next_repetitions is the schedule: double the
repetitions after each unclear batch, up to the cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hoplab.analysis import verdicts
from hoplab.analysis.compare import compare_runs
from hoplab.analysis.power import Power, noise_cv, power_figures
from hoplab.errors import UsageError
from hoplab.record import RunRecord

ALPHA = 0.01
# Bootstrap resamples of the interval; its 1 % tails rest on 10 resamples each.
_RESAMPLES = 1000
# The first batch: the fewest repetitions per side with which the exact rank test can
# reach p < 0.01 at all (2 / C(10, 5) = 0.0079; 4 vs 4 gives at best 0.029).
FIRST_BATCH = 5

GOOD, BAD, SKIP = 0, 1, 125


@dataclass(frozen=True)
class Verdict:
    verdict: str                   # verdicts.DIFFERENT, SAME or UNCLEAR
    a: tuple[float, ...]
    b: tuple[float, ...]
    median_a: float
    median_b: float
    change: float                  # relative change of B's median against A's (0.05 = 5 %)
    ci: tuple[float, float]        # (1 - 2 alpha) interval of the relative change of means
    p: float | None                # two-sided Mann-Whitney
    bound: float | None            # relative equivalence bound; None: "same" not asked
    cv: float                      # noise of one repetition, pooled over both sides
    alpha: float

    @cached_property
    def power(self) -> Power:
        """What len(a) vs len(b) repetitions can detect, and what a change of the bound
        needs (computed when asked: the power arithmetic costs more than the verdict)."""
        return power_figures(self.cv, len(self.a), len(self.b), alpha=self.alpha,
                             change=self.bound if self.bound else None)

    def describe(self) -> str:
        p = "p n/a" if self.p is None else f"p = {self.p:.3g}"
        text = (f"{len(self.a)} vs {len(self.b)} repetitions, change {self.change * 100:+.1f} % "
                f"({(1 - 2 * self.alpha) * 100:.0f} % CI {self.ci[0] * 100:+.1f} .. "
                f"{self.ci[1] * 100:+.1f} %), {p}")
        if self.bound is not None:
            text += f", bound +-{self.bound * 100:.1f} %"
        return text


def judge(a: Sequence[float], b: Sequence[float], *, p: float | None,
          ci: tuple[float, float], bound: float | None, alpha: float = ALPHA) -> Verdict:
    """The verdict on A against B, given the rank test's p and the (1 - 2 alpha) interval
    of the relative change of medians (compare_runs gives both: judge_runs)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma, mb = float(np.median(xa)), float(np.median(xb))
    change = (mb - ma) / abs(ma) if ma else math.nan
    lo, hi = (-math.inf, math.inf) if any(map(math.isnan, ci)) else ci
    # Identical repetitions (a quantised figure) have no noise: any change is detectable
    # (power.py). NaN (fewer than two repetitions a side) says "nothing detectable".
    cv = noise_cv([a, b])
    if bound is not None and verdicts.shows_same((lo, hi), bound):
        # Checked first: a difference shown smaller than the bound is no difference at
        # that bound, even when the rank test sees it (five runs a side without overlap
        # give p = 0.0079, and a drift of 0.2 % over a session does that with quiet
        # runs).
        verdict = verdicts.SAME
    elif p is not None and p < alpha:
        verdict = verdicts.DIFFERENT
    else:
        verdict = verdicts.UNCLEAR
    return Verdict(verdict=verdict, a=tuple(map(float, a)), b=tuple(map(float, b)),
                   median_a=ma, median_b=mb, change=change, ci=(lo, hi), p=p, bound=bound,
                   cv=cv, alpha=alpha)


def judge_runs(a: Sequence[RunRecord], b: Sequence[RunRecord], metric: str, *,
               bound: float | None, alpha: float = ALPHA) -> Verdict:
    """judge on one metric of two sets of stored runs. The values, the p and the interval
    are those of analysis/compare.py (one comparison path): its Mann-Whitney p and its
    bootstrap interval of the change of medians, here at 1 - 2 alpha. UsageError if runs
    were measured differently or a side has no run with the metric."""
    (found,) = compare_runs(a, b, [metric], alpha=2 * alpha, resamples=_RESAMPLES)
    if len(found.a_values) < 1 or len(found.b_values) < 1:
        side = "A" if not found.a_values else "B"
        raise UsageError(f"no run of side {side} has metric {metric}")
    return judge(found.a_values, found.b_values, p=found.p_value,
                 ci=(found.ci_low_pct / 100, found.ci_high_pct / 100), bound=bound,
                 alpha=alpha)


@dataclass(frozen=True)
class Classification:
    answer: int                    # GOOD (0), BAD (1) or SKIP (125), as git bisect run reads it
    word: str                      # "good", "bad", "cannot tell"
    final: bool                    # False: unclear, more repetitions may decide
    vs_good: Verdict
    vs_bad: Verdict
    reason: str


def half_step(good: Sequence[float], bad: Sequence[float]) -> float:
    """Half the step from good's median to bad's, in the metric's units."""
    return abs(float(np.median(bad)) - float(np.median(good))) / 2


def classify(vs_good: Verdict, vs_bad: Verdict) -> Classification:
    """A commit's answer from its verdicts against good and against bad, each judged with
    an equivalence bound of half the step between them."""
    g, b = vs_good.verdict, vs_bad.verdict
    same, different = verdicts.SAME, verdicts.DIFFERENT
    if g == same and b != same:
        return Classification(GOOD, "good", True, vs_good, vs_bad,
                              "within half the step of good")
    if b == same and g != same:
        return Classification(BAD, "bad", True, vs_good, vs_bad, "within half the step of bad")
    if g == different and b == different:
        # A third level, or runs disturbed by something else: more repetitions tell
        # which, and at the cap it stays 125.
        return Classification(SKIP, "cannot tell", False, vs_good, vs_bad,
                              "unlike both good and bad (a third level? --all finds every "
                              "step)")
    return Classification(SKIP, "cannot tell", False, vs_good, vs_bad,
                          "not decided at these repetitions: " + vs_good.power.describe())


def next_repetitions(current: int, cap: int) -> int | None:
    """How many repetitions the next batch brings a side to (doubling, as Pinpoint
    adds attempts), or None at the cap."""
    if current >= cap:
        return None
    return min(cap, max(FIRST_BATCH, 2 * current))
