"""The numerical work of edivisive.py (the detector, its parameters and how it decides are
described there): the E-divisive divergence, the test of a split, the scan left to right.
Loaded when the detector first locates (numpy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hoplab.analysis.detectors.flat import Flat
from hoplab.analysis.ranks import rank_p

SHORT_STEP = 2.0            # noise SDs a step needs while it has few values after it

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


def _best_split(series: Flat, lo: int, hi: int, min_size: int, alpha: float
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


def _search_before(series: Flat, lo: int, hi: int, min_size: int, alpha: float
                   ) -> list[int]:
    """Change points among values lo..hi-1, found by splitting in two until no split is
    significant (binary segmentation on a stretch that is complete)."""
    found = _best_split(series, lo, hi, min_size, alpha)
    if found is None:
        return []
    return [*_search_before(series, lo, found, min_size, alpha), found,
            *_search_before(series, found, hi, min_size, alpha)]


def scan(values: Sequence[Sequence[float]], *, min_size: int, window: int, alpha: float
         ) -> list[int]:
    """The indexes of the first value after each change point, in order."""
    if min_size < 1 or window < 2 * min_size:
        raise ValueError(f"window {window} must hold two stretches of {min_size} values")
    series = Flat(values)
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
