"""Where a series of values (versions, commits) changed: every step, with its size and p.

    found = detect([[101, 99, 100], [100, 98, 102], ..., [125, 124, 127], ...])
    found.change_points[0].index          # first value after the step
    found.change_points[0].change_pct     # +25.1, with ci_pct and p

Each value holds every repetition measured for it; all of them are used, not medians.

How: a sequential, windowed E-divisive means detector (Matteson and James 2014, the
divergence Hunter / Apache Otava rank splits by) with a significance test of our own.
Values are read left to right, as they would be appended. At each new value t the
window holds the values since the last change point, at most `window` of them; the
split of the window with the largest E-divisive divergence is the candidate. It is a
change point when it has at least `min_size` values on each side, when a Mann-Whitney
rank test of the repetitions on its two sides gives p below `alpha` after a Bonferroni
correction for the number of splits tried, and, while it has few values after it yet,
when the step is at least SHORT_STEP times the noise (two values high together by
chance are a blip, not a step). The candidate is sought up to the newest value, so a
step among the newest values holds the decision back instead of pulling the change
point early. The window then restarts at the change point, and the stretch before it
is searched again (a larger step found first can hide a smaller one just before it).

Every decision is taken on the values up to t only, so appending values never moves
or removes a change point found before (tests/unit/test_changepoints.py checks it).
What each change point then reports (medians, change, its 95 % bootstrap interval, p)
is measured on the whole stretches between its neighbours, at most `window` values on
each side, and so gets sharper as values come in.

detect_many runs detect over several metrics of the same runs and keeps the change
points that survive a Benjamini-Hochberg correction across all of them.

bench/changepoints.py measures this detector against ruptures' PELT and asv's step
detection on the same generated series (docs/trend.md has the figures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hoplab.analysis.power import Power, detectable_change, noise_cv, power_figures
from hoplab.analysis.ranks import benjamini_hochberg, rank_p

MIN_SIZE = 2                # values on each side of a change point
WINDOW = 40                 # values a window holds at most
ALPHA = 0.0005              # per decision, after the correction for the splits tried
SHORT_STEP = 2.0            # noise SDs a step needs while it has few values after it
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
                                    # those stretches at 80 % power (inf: none)


@dataclass(frozen=True)
class Detection:
    change_points: tuple[ChangePoint, ...]
    cv: float                       # noise of one repetition, pooled within values
    power: Power | None             # what a step between two stretches of `span` values
    span: int                       # can be told from noise (None: too few values)


def _divergence(x: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """E-divisive's scaled divergence (alpha = 1) of x[:k] against x[k:] for each k in
    cuts, from one matrix of distances and its two-dimensional prefix sums."""
    n = len(x)
    d = np.abs(x[:, None] - x[None, :])
    # Sums over i < k of each row's whole sum and of its part left of the diagonal give
    # every block sum the divergence needs, without a two-dimensional prefix sum.
    row = np.concatenate([[0.0], d.sum(1).cumsum()])
    lower = np.concatenate([[0.0], np.tril(d, -1).sum(1).cumsum()])
    total = row[n]
    left = 2 * lower[cuts]                          # both indices < k
    rows = row[cuts]                                # i < k, any j
    cross = rows - left
    right = total - 2 * rows + left
    m = cuts.astype(float)
    r = n - m
    within_l = np.where(m > 1, left / np.maximum(m * (m - 1), 1), 0.0)
    within_r = np.where(r > 1, right / np.maximum(r * (r - 1), 1), 0.0)
    scaled: np.ndarray = (m * r / n) * (2 * cross / (m * r) - within_l - within_r)
    return scaled


class _Series:
    """The repetitions of all values flattened, with where each value starts."""

    def __init__(self, values: Sequence[Sequence[float]]) -> None:
        self.points = np.concatenate([np.asarray(v, dtype=float) for v in values]) \
            if values else np.zeros(0)
        self.starts = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(int)

    def span(self, lo: int, hi: int) -> np.ndarray:
        """The repetitions of values lo..hi-1."""
        return self.points[self.starts[lo]:self.starts[hi]]


def _best_split(series: _Series, lo: int, hi: int, min_size: int, alpha: float
                ) -> int | None:
    """The split of values lo..hi-1 a change point is at, or None if none is significant.

    The best split is sought up to one value before hi, though a change point needs
    min_size values after it: a step among the last values pulls the best split of the
    shorter range towards its edge, early. When the best split lies there, among the
    newest values, nothing is decided until more values come."""
    if hi - lo < 2 * min_size:
        return None
    wide = np.arange(lo + min_size, hi)
    x = series.span(lo, hi)
    best = int(wide[int(np.argmax(_divergence(x, series.starts[wide] - series.starts[lo])))])
    tried = hi - lo - 2 * min_size + 1             # splits with min_size values each side
    if best > hi - min_size:
        return None
    before, after = series.span(lo, best), series.span(best, hi)
    if hi - best <= 2 * min_size and not _clear_step(before, after):
        return None
    p = rank_p(before, after)
    return best if p * tried < alpha else None


def _clear_step(before: np.ndarray, after: np.ndarray) -> bool:
    """A step with few values after it yet is taken only if it is at least SHORT_STEP
    times the noise (robust SD of the values before it): two values that happen to be
    high together are a blip, not a step, and pass the rank test as often as a step
    does at the newest values. Smaller steps wait for more values, which they get."""
    sd = 1.4826 * float(np.median(np.abs(before - np.median(before))))
    return abs(float(np.median(after)) - float(np.median(before))) >= SHORT_STEP * sd


def _search_before(series: _Series, lo: int, hi: int, min_size: int, alpha: float
                   ) -> list[int]:
    """Change points among values lo..hi-1, found by splitting in two until no split is
    significant (binary segmentation on a stretch that is complete)."""
    found = _best_split(series, lo, hi, min_size, alpha)
    if found is None:
        return []
    return [*_search_before(series, lo, found, min_size, alpha), found,
            *_search_before(series, found, hi, min_size, alpha)]


def locate(values: Sequence[Sequence[float]], *, min_size: int = MIN_SIZE,
           window: int = WINDOW, alpha: float = ALPHA) -> list[int]:
    """The indexes of the first value after each change point, in order."""
    if min_size < 1 or window < 2 * min_size:
        raise ValueError(f"window {window} must hold two stretches of {min_size} values")
    series = _Series(values)
    found: list[int] = []
    start = 0
    for t in range(2 * min_size, len(values) + 1):
        lo = max(start, t - window)
        if t - lo < 2 * min_size:
            continue
        split = _best_split(series, lo, t, min_size, alpha)
        if split is None:
            continue
        found += [i for i in _search_before(series, start, split, min_size, alpha)
                  if i not in found]
        found.append(split)
        start = split
    return found


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
             min_size: int = MIN_SIZE, alpha: float = ALPHA, cv: float | None = None
             ) -> list[ChangePoint]:
    """Each change point's figures, from the stretches between it and its neighbours
    (at most `window` values on each side), with the smallest step the detector could
    confirm between them: the rank test's power at these repetitions and the noise of
    the whole series, at the level the detector would use on a window of both
    stretches."""
    series = _Series(values)
    cv = noise_cv(values) if cv is None else cv
    bounds = [0, *cuts, len(values)]
    out = []
    for i, cut in enumerate(cuts):
        lo, hi = max(bounds[i], cut - window), min(bounds[i + 2], cut + window)
        before, after = series.span(lo, cut), series.span(cut, hi)
        mb, ma = float(np.median(before)), float(np.median(after))
        splits = max(1, hi - lo - 2 * min_size + 1)
        detectable = (detectable_change(cv, len(before), len(after), alpha=alpha / splits,
                                        power=POWER) if cv == cv else math.nan)
        out.append(ChangePoint(
            index=cut, median_before=mb, median_after=ma,
            change_pct=(ma / mb - 1) * 100 if mb else math.nan,
            ci_pct=_bootstrap_change(before, after, resamples, seed + cut),
            p=rank_p(before, after), n_before=len(before), n_after=len(after),
            detectable_pct=detectable * 100))
    return out


def _power(values: Sequence[Sequence[float]], cv: float, window: int, alpha: float,
           min_size: int, change: float | None) -> tuple[Power | None, int]:
    """What the detector can tell between two stretches of `span` values (half a window,
    or half the series if shorter), at the median repetitions per value."""
    span = min(window // 2, len(values) // 2)
    if span < min_size or math.isnan(cv):
        return None, span
    reps = int(np.median([len(v) for v in values]))
    splits = 2 * span - 2 * min_size + 1
    return power_figures(cv, span * reps, span * reps, change=change, alpha=alpha / splits,
                         power=POWER), span


def detect(values: Sequence[Sequence[float]], *, min_size: int = MIN_SIZE,
           window: int = WINDOW, alpha: float = ALPHA, change: float | None = None,
           seed: int = 0) -> Detection:
    """Every change point of a series of values, each a list of repetitions, with the
    noise and the power figures (`change`, a relative step such as 0.05, asks how many
    repetitions per value it would need)."""
    values = [list(v) for v in values]
    if any(len(v) == 0 for v in values):
        raise ValueError("every value needs at least one repetition")
    cuts = locate(values, min_size=min_size, window=window, alpha=alpha)
    cv = noise_cv(values)
    power, span = _power(values, cv, window, alpha, min_size, change)
    return Detection(change_points=tuple(describe(values, cuts, window=window, seed=seed,
                                                  min_size=min_size, alpha=alpha, cv=cv)),
                     cv=cv, power=power, span=span)


def detect_many(series: Mapping[str, Sequence[Sequence[float]]], *, level: float = FDR,
                min_size: int = MIN_SIZE, window: int = WINDOW, alpha: float = ALPHA,
                change: float | None = None, seed: int = 0) -> dict[str, Detection]:
    """detect for each metric of the same runs, then a Benjamini-Hochberg correction over
    every change point of every metric, so that analysing ten metrics at once does not
    yield ten times the false steps; change points that do not survive it are dropped."""
    found = {name: detect(values, min_size=min_size, window=window, alpha=alpha,
                          change=change, seed=seed) for name, values in series.items()}
    flat = [(name, cp) for name, d in found.items() for cp in d.change_points]
    keep = benjamini_hochberg([cp.p for _, cp in flat], level)
    kept: dict[str, list[ChangePoint]] = {name: [] for name in found}
    for (name, cp), ok in zip(flat, keep, strict=True):
        if ok:
            kept[name].append(cp)
    return {name: Detection(change_points=tuple(kept[name]), cv=d.cv, power=d.power,
                            span=d.span) for name, d in found.items()}
