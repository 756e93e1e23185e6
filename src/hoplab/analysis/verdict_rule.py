"""compare's verdict rule: the rank test decides, its bootstrap interval stands beside it.

    judged = judge([100, 101, 99, 100.5], [103, 104, 102, 101], "higher",
                   alpha=0.05, margin_pct=2.0, min_change_pct=1.0, seed=0, resamples=2000)
    judged.verdict, judged.p, judged.ci_pct, judged.detectable_pct

compare_groups calls it for every metric of every group (through compare_runs), and so
does everything that shows a comparison: the CLI, the report, the dashboard. In order
(the words: analysis/verdicts.py; why: docs/compare.md):

1. n/a: the metric has no better direction (`better` None: neutral or unregistered).
2. not enough data: a side has fewer than 2 values, or the sizes are too small for the
   rank test to ever reach p <= alpha (its smallest two-sided p is 2 / C(na + nb, na):
   1/3 for 2+2, 0.1 for 3+3, 0.029 for 4+4).
3. better / worse: the Mann-Whitney p <= alpha, the (1 - alpha) bootstrap interval of
   the difference of medians excludes 0, and the change is at least `min_change_pct`
   of A's median; the direction of the metric names it.
4. same: an equivalence shown: the whole (1 - alpha) interval of the change in % lies
   inside +-margin_pct (when A's median is 0 and there is no interval in %, the
   difference's interval is exactly 0).
5. unclear ("no clear difference"): anything else; with the smallest change these
   repetitions could have seen (80 % power at alpha, analysis/power.py), since not
   rejecting "no change" does not show there is none.

The interval is a percentile bootstrap of the change between the two medians; for
trials kept one by one (page loads) it resamples runs, then trials within each drawn
run, so that runs that disagree widen it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from hoplab.analysis import verdicts
from hoplab.analysis.power import detectable_change, noise_cv
from hoplab.analysis.ranks import min_p, rank_p
from hoplab.analysis.sizes import P_SLACK as _P_SLACK

# How many runs a side the rule needs, said where it matters (check, compare's notes).
from hoplab.analysis.sizes import can_reach as can_reach
from hoplab.analysis.sizes import runs_per_side as runs_per_side

MARGIN_PCT = 2.0            # compare's --margin: "same" within +-2 %
MIN_CHANGE_PCT = 1.0        # a significant change smaller than this is no verdict of
                            # better or worse
POWER = 0.8

Trials = tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]]


@dataclass(frozen=True)
class Judgement:
    verdict: str                    # one of analysis/verdicts.py VERDICTS
    p: float | None                 # two-sided Mann-Whitney; None if a side has < 2 values
    ci_pct: tuple[float, float]     # (1 - alpha) interval of the change in %; nan if none
    # unclear: the smallest change (%) these repetitions find with 80 % power at alpha
    # (inf: none at these sizes); nan for every other verdict.
    detectable_pct: float


class Rule(Protocol):
    """What compare_groups asks of a verdict rule (judge is hoplab's)."""

    def __call__(self, va: Sequence[float], vb: Sequence[float],
                 better: Literal["higher", "lower"] | None, *, alpha: float,
                 margin_pct: float, min_change_pct: float, seed: int, resamples: int,
                 trials: Trials | None = None) -> Judgement: ...


def judge(va: Sequence[float], vb: Sequence[float],
          better: Literal["higher", "lower"] | None, *, alpha: float,
          margin_pct: float = MARGIN_PCT, min_change_pct: float = MIN_CHANGE_PCT,
          seed: int = 0, resamples: int = 2000, trials: Trials | None = None) -> Judgement:
    """The verdict on B (vb) against A (va), one value per run, or per trial when
    `trials` gives them grouped by run (each side's runs, as lists)."""
    enough = len(va) >= 2 and len(vb) >= 2
    nan = (math.nan, math.nan)
    if not enough:
        ci_pct, ci_diff = nan, nan
    elif trials is None:
        ci_pct, ci_diff = bootstrap(va, vb, seed=seed, resamples=resamples, alpha=alpha)
    else:
        ci_pct, ci_diff = bootstrap_trials(trials[0], trials[1], seed=seed,
                                           resamples=resamples, alpha=alpha)
    p = rank_p(va, vb) if enough else None
    level = alpha * (1 + _P_SLACK)
    verdict = _verdict(va, vb, better, p, level, ci_pct, ci_diff, margin_pct, min_change_pct)
    detectable = math.nan
    if verdict == verdicts.UNCLEAR:
        # At the level the verdict uses (p <= alpha, give or take the slack): 3 + 3 runs
        # at alpha 0.1 do reach it, where the power arithmetic's p < alpha would not.
        detectable = 100 * detectable_change(noise_cv([va, vb]), len(va), len(vb),
                                             alpha=level, power=POWER)
    return Judgement(verdict=verdict, p=p, ci_pct=ci_pct, detectable_pct=detectable)


def _verdict(va: Sequence[float], vb: Sequence[float],
             better: Literal["higher", "lower"] | None, p: float | None, level: float,
             ci_pct: tuple[float, float], ci_diff: tuple[float, float], margin_pct: float,
             min_change_pct: float) -> str:
    if better is None:
        return verdicts.NA
    if p is None or min_p(len(va), len(vb)) > level:
        return verdicts.NOT_ENOUGH
    ma, mb = float(np.median(va)), float(np.median(vb))
    change = 100 * (mb - ma) / abs(ma) if ma != 0 else math.nan
    large = abs(change) >= min_change_pct if not math.isnan(change) else mb != ma
    if p <= level and (ci_diff[0] > 0 or ci_diff[1] < 0) and large:
        return verdicts.BETTER if (mb > ma) == (better == "higher") else verdicts.WORSE
    if verdicts.shows_same(ci_pct, margin_pct) or (
            math.isnan(ci_pct[0]) and ci_diff == (0.0, 0.0)):
        return verdicts.SAME
    return verdicts.UNCLEAR


def bootstrap(va: Sequence[float], vb: Sequence[float], *, seed: int, resamples: int,
              alpha: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Percentile bootstrap CIs of B's median against A's: (of the change in %, of the
    difference). Each resample draws len(va) runs of A, then len(vb) runs of B, with
    replacement, from numpy's default_rng(seed), all A draws before all B draws."""
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(va, dtype=float), np.asarray(vb, dtype=float)
    ia = rng.integers(0, len(xa), size=(resamples, len(xa)))
    ib = rng.integers(0, len(xb), size=(resamples, len(xb)))
    return _intervals(np.median(xa[ia], axis=1), np.median(xb[ib], axis=1), alpha)


def bootstrap_trials(ca: Sequence[Sequence[float]], cb: Sequence[Sequence[float]], *,
                     seed: int, resamples: int,
                     alpha: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """bootstrap for trials grouped by run (each inner list one run's): a resample draws
    as many runs as the side has, with replacement, then within each drawn run as many
    of its trials, with replacement, and takes the median of all drawn trials. Trials of
    one run share its conditions: a spread between runs widens the interval, as it
    should; with one run a side only the trials' own spread is left. All A draws first."""
    rng = np.random.default_rng(seed)
    return _intervals(_trial_medians(rng, ca, resamples), _trial_medians(rng, cb, resamples),
                      alpha)


def _trial_medians(rng: np.random.Generator, runs: Sequence[Sequence[float]],
                   resamples: int) -> Any:
    n, longest = len(runs), max(len(r) for r in runs)
    lens = np.array([len(r) for r in runs])
    table = np.full((n, longest), np.nan)
    for i, r in enumerate(runs):
        table[i, :len(r)] = r
    drawn = rng.integers(0, n, size=(resamples, n))
    size = lens[drawn][..., None]                       # (resamples, n, 1)
    pick = (rng.random((resamples, n, longest)) * size).astype(int)
    values = np.where(np.arange(longest) < size, table[drawn[..., None], pick], np.nan)
    return np.nanmedian(values.reshape(resamples, -1), axis=1)


def _intervals(ma: Any, mb: Any, alpha: float) -> tuple[tuple[float, float],
                                                        tuple[float, float]]:
    """The (alpha/2, 1 - alpha/2) percentiles of the resampled change in % and
    difference; no percent interval when a resampled A median is 0."""
    q = (100 * alpha / 2, 100 * (1 - alpha / 2))
    lo_d, hi_d = (float(x) for x in np.percentile(mb - ma, q))
    if np.any(ma == 0):
        return (math.nan, math.nan), (lo_d, hi_d)
    lo_p, hi_p = (float(x) for x in np.percentile(100 * (mb - ma) / np.abs(ma), q))
    return (lo_p, hi_p), (lo_d, hi_d)
