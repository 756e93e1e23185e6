"""Where a series of values (versions, commits) changed: every step, with its size and p.

    found = detect([[101, 99, 100], [100, 98, 102], ..., [125, 124, 127], ...])
    found.change_points[0].index          # first value after the step
    found.change_points[0].change_pct     # +25.1, with ci_pct and p

Each value holds every repetition measured for it; all of them are used, not medians.

A detector places the change points (analysis/detectors: hoplab's E-divisive, the
default, or ruptures' PELT and binary segmentation, by name). What each change point
then reports is measured here, the same for every detector: the medians, the change,
its 95 % bootstrap interval and the rank test's p of the whole stretches between it and
its neighbours, at most WINDOW values on each side (so they get sharper as values come
in), and the smallest step the detector could confirm between them. The power figures
are those of the rank test at the detector's level; a detector that decides by a
penalty has none, and Detection.reason says so, as it says why a series too short for
any step, or without measurable noise, has none.

detect_many runs detect over several metrics of the same runs and keeps the change
points that survive a Benjamini-Hochberg correction across all of them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hoplab.analysis import detectors
from hoplab.analysis.detectors.base import MIN_SIZE, Detector
from hoplab.analysis.detectors.flat import Flat
from hoplab.analysis.power import Power, detectable_change, noise_cv, power_figures
from hoplab.analysis.ranks import benjamini_hochberg, rank_p

__all__ = ["MIN_SIZE", "ChangePoint", "Detection", "describe", "detect", "detect_many"]

WINDOW = 40                 # values on each side a change point's figures use at most
FDR = 0.05                  # Benjamini-Hochberg level across metrics
RESAMPLES = 2000            # bootstrap resamples for the interval of a change
POWER = 0.8


@dataclass(frozen=True)
class ChangePoint:
    index: int                      # the first value after the change
    median_before: float
    median_after: float
    change_pct: float
    ci_pct: tuple[float, float]     # 95 % bootstrap interval of change_pct
    p: float                        # rank test of the stretches on both sides
    n_before: int                   # repetitions on each side that the figures used
    n_after: int
    detectable_pct: float           # smallest step (%) the detector can confirm between
                                    # those stretches at 80 % power (inf: none; nan: the
                                    # detector has no level)


@dataclass(frozen=True)
class Detection:
    change_points: tuple[ChangePoint, ...]
    cv: float                       # noise of one repetition, pooled within values
    power: Power | None             # what a step between two stretches of `span` values
    span: int                       # can be told from noise (None: see reason)
    detector: str = detectors.DEFAULT
    reason: str | None = None       # why there are no power figures
    too_short: bool = False         # fewer values than any step needs: cannot tell


def _bootstrap_change(before: np.ndarray, after: np.ndarray, resamples: int,
                      seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    mb = np.median(rng.choice(before, (resamples, len(before))), axis=1)
    ma = np.median(rng.choice(after, (resamples, len(after))), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = (ma / mb - 1) * 100
    lo, hi = np.nanpercentile(pct, [2.5, 97.5])
    return float(lo), float(hi)


def describe(values: Sequence[Sequence[float]], cuts: Sequence[int], *,
             window: int = WINDOW, resamples: int = RESAMPLES, seed: int = 0,
             min_size: int = MIN_SIZE, alpha: float | None = None, cv: float | None = None
             ) -> list[ChangePoint]:
    """Each change point's figures, from the stretches between it and its neighbours
    (at most `window` values on each side), with the smallest step a detector deciding
    at level `alpha` (per split, Bonferroni over a window of both stretches) could
    confirm between them: the rank test's power at these repetitions and the noise of
    the whole series. NaN without a level."""
    series = Flat(values)
    cv = noise_cv(values) if cv is None else cv
    bounds = [0, *cuts, len(values)]
    out = []
    for i, cut in enumerate(cuts):
        lo, hi = max(bounds[i], cut - window), min(bounds[i + 2], cut + window)
        before, after = series.span(lo, cut), series.span(cut, hi)
        mb, ma = float(np.median(before)), float(np.median(after))
        splits = max(1, hi - lo - 2 * min_size + 1)
        detectable = (detectable_change(cv, len(before), len(after), alpha=alpha / splits,
                                        power=POWER)
                      if cv == cv and alpha is not None else math.nan)
        out.append(ChangePoint(
            index=cut, median_before=mb, median_after=ma,
            change_pct=(ma / mb - 1) * 100 if mb else math.nan,
            ci_pct=_bootstrap_change(before, after, resamples, seed + cut),
            p=rank_p(before, after), n_before=len(before), n_after=len(after),
            detectable_pct=detectable * 100))
    return out


def _power(values: Sequence[Sequence[float]], cv: float, detector: Detector,
           min_size: int, change: float | None) -> tuple[Power | None, int, str | None]:
    """What the detector can tell between two stretches of `span` values (half its
    window, or half the series if shorter), at the median repetitions per value; or why
    nothing can be said."""
    n = len(values)
    span = min((detector.window or n) // 2, n // 2)
    if n < 2 * min_size:
        return None, span, (f"a step needs at least {min_size} values on each side, and "
                            f"there {'is' if n == 1 else 'are'} {n} value{'s' * (n != 1)}")
    if span < min_size:
        return None, span, (f"the {detector.name} detector's window of {detector.window} "
                            f"values holds no two stretches of {min_size}")
    if detector.alpha is None:
        return None, span, (f"the {detector.name} detector decides by a penalty, not by a "
                            "test at a level, so it gives no power figures")
    if math.isnan(cv):
        if all(len(v) < 2 for v in values):
            return None, span, ("every value has one repetition, so the noise between "
                                "repetitions is unknown")
        return None, span, ("the repetitions vary around a median of 0, where noise has no "
                            "relative size")
    reps = int(np.median([len(v) for v in values]))
    splits = 2 * span - 2 * min_size + 1
    return power_figures(cv, span * reps, span * reps, change=change,
                         alpha=detector.alpha / splits, power=POWER), span, None


def detect(values: Sequence[Sequence[float]], *, detector: str | Detector | None = None,
           min_size: int = MIN_SIZE, change: float | None = None, seed: int = 0
           ) -> Detection:
    """Every change point of a series of values, each a list of repetitions, placed by
    `detector` (a registered name, a Detector, None: the registry's default), with the
    noise and the power figures (`change`, a relative step such as 0.05, asks how many
    repetitions per value it would need)."""
    found = detector if isinstance(detector, Detector) else \
        detectors.get(detector or detectors.DEFAULT)
    values = [list(v) for v in values]
    if any(len(v) == 0 for v in values):
        raise ValueError("every value needs at least one repetition")
    cuts = found.locate(values, min_size) if len(values) >= 2 * min_size else []
    cv = noise_cv(values)
    power, span, reason = _power(values, cv, found, min_size, change)
    return Detection(change_points=tuple(describe(values, cuts, seed=seed, min_size=min_size,
                                                  alpha=found.alpha, cv=cv)),
                     cv=cv, power=power, span=span, detector=found.name, reason=reason,
                     too_short=len(values) < 2 * min_size)


def detect_many(series: Mapping[str, Sequence[Sequence[float]]], *, level: float = FDR,
                detector: str | Detector | None = None, min_size: int = MIN_SIZE,
                change: float | None = None, seed: int = 0) -> dict[str, Detection]:
    """detect for each metric of the same runs, then a Benjamini-Hochberg correction over
    every change point of every metric, so that analysing ten metrics at once does not
    yield ten times the false steps; change points that do not survive it are dropped."""
    found = {name: detect(values, detector=detector, min_size=min_size, change=change,
                          seed=seed) for name, values in series.items()}
    flat = [(name, cp) for name, d in found.items() for cp in d.change_points]
    keep = benjamini_hochberg([cp.p for _, cp in flat], level)
    kept: dict[str, list[ChangePoint]] = {name: [] for name in found}
    for (name, cp), ok in zip(flat, keep, strict=True):
        if ok:
            kept[name].append(cp)
    return {name: dataclasses.replace(d, change_points=tuple(kept[name]))
            for name, d in found.items()}
