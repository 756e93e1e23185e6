"""Small, exact statistics over plain lists: no numpy needed for a few thousand values."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

# Bufferbloat grades by the latency a load adds (ms), as the DSLReports and Waveform
# tests publish them: A+ under 5 ms, A under 30, B under 60, C under 200, D under 400.
_GRADES = ((5.0, "A+"), (30.0, "A"), (60.0, "B"), (200.0, "C"), (400.0, "D"))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks, as
    numpy.percentile's default; NaN for no values."""
    if not values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not in 0..100")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def mean_abs_diff(values: Sequence[float]) -> float:
    """Mean absolute difference of consecutive values: the jitter of an RTT sequence
    (ping-exp and iperf3 report variation between successive packets, not spread)."""
    if len(values) < 2:
        return math.nan
    return math.fsum(abs(b - a) for a, b in itertools.pairwise(values)) / (
        len(values) - 1)


def jain_index(shares: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when all are equal, 1/n when
    one takes everything."""
    if not shares:
        return math.nan
    square_sum = math.fsum(x * x for x in shares)
    if square_sum == 0:
        return math.nan
    return math.fsum(shares) ** 2 / (len(shares) * square_sum)


def bufferbloat_grade(increase_ms: float) -> str:
    if math.isnan(increase_ms):
        return "?"
    for limit, grade in _GRADES:
        if increase_ms < limit:
            return grade
    return "F"


def binned_sum(series: Sequence[tuple[Sequence[float], Sequence[float]]], step: float,
               end: float) -> tuple[list[float], list[float]]:
    """Sum several rate series on one grid of `step` seconds up to `end`. Times are
    interval ends; each sample goes to the grid point nearest to it, so flows started
    a few ms apart add up in the same step; a series with two samples in one bin (a
    short last interval) adds their mean, not their sum."""
    bins = max(1, math.ceil(end / step - 1e-9))
    total = [0.0] * bins
    for ts, vs in series:
        sums = [0.0] * bins
        counts = [0] * bins
        for t, v in zip(ts, vs, strict=True):
            i = min(bins - 1, max(0, round(t / step) - 1))
            sums[i] += v
            counts[i] += 1
        for i in range(bins):
            if counts[i]:
                total[i] += sums[i] / counts[i]
    return [round((i + 1) * step, 6) for i in range(bins)], total
