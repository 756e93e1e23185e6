"""The words a verdict is said in, and what each one claims: one definition for every
command and view that judges (compare, and through it the report and the dashboard;
trend; bisect).

- better / worse: the rank test rejects "no change" and the interval of the change
  excludes 0 (compare's rule, analysis/rank_rule.py); the metric registry says which
  direction is better.
- same: an equivalence shown, not merely no difference found: the whole interval of the
  change lies inside +-margin (compare: --margin, 2 %; bisect: half the step from good
  to bad). shows_same is that test, for both.
- unclear, read "no clear difference": neither shown. The test does not reject and the
  interval reaches past the margin; it comes with the smallest change these
  repetitions could have seen (analysis/power.py), since a smaller one can hide in it.
- not enough data: too few repetitions (or values, for a trend's step) for the test to
  decide whatever the data; said with why and how many would do.
- n/a: the metric has no better direction (a packet count), or is not registered.
- different: bisect's judgement of a commit against good and bad, which asks whether
  the two differ beyond the noise, not which is better.

A verdict is stored and written to JSON as its name here; word() is how text shows it.
rank() is the one order of changes every list of them uses (compare's headline, the
report's first screen, the dashboard's "what changed").
"""

from __future__ import annotations

import math

BETTER = "better"
WORSE = "worse"
SAME = "same"
UNCLEAR = "unclear"
NOT_ENOUGH = "not enough data"
NA = "n/a"
DIFFERENT = "different"

VERDICTS = (BETTER, WORSE, SAME, UNCLEAR, NOT_ENOUGH, NA)

_WORDS = {UNCLEAR: "no clear difference"}


def word(verdict: str) -> str:
    """How a verdict reads in a table or a sentence: "no clear difference" for unclear,
    the others as they are named."""
    return _WORDS.get(verdict, verdict)


def shows_same(ci: tuple[float, float], margin: float) -> bool:
    """Whether an interval of a change shows sameness at `margin` (both relative, or
    both in %): it lies wholly inside +-margin, two one-sided tests at the interval's
    level each rejecting a change as large as the margin. An interval that could not be
    computed (NaN) shows nothing."""
    lo, hi = ci
    return not (math.isnan(lo) or math.isnan(hi)) and -margin < lo and hi < margin


# A list of changes reads worst first: regressions, then improvements, then the rest.
_ORDER = {WORSE: 0, BETTER: 1, UNCLEAR: 2, SAME: 3, NOT_ENOUGH: 4, NA: 5}


def rank(verdict: str, change_pct: float) -> tuple[int, float]:
    """Where a change stands in a list of changes (sort by it): worse before better
    before the others, each by the size of its change, the largest first; a change that
    could not be computed (NaN) after those that could."""
    size = abs(change_pct)
    return _ORDER.get(verdict, len(_ORDER)), -size if math.isfinite(size) else math.inf
