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
               end: float, starts: Sequence[float | None] | None = None
               ) -> tuple[list[float], list[float]]:
    """Sum several rate series on one grid of `step` seconds, labelled by bin end.

    A series' times are interval ends: interval i spans [t[i-1], t[i]) and the first
    starts at the series' entry in `starts` (when the tool started), or one `step`
    before t[0] when that is None. Each interval's bytes are spread over the bins its
    span overlaps, pro rata, so a flow whose intervals straddle the grid (one started at
    0.5 s on a 0.2 s grid) keeps every byte and leaves no bin empty; rounding interval
    ends to the nearest grid point put two in one bin and none in the next. The grid
    runs to `end`, or further when an interval ends later (a receiver still draining
    its queue)."""
    last = max((ts[-1] for ts, _ in series if ts), default=0.0)
    bins = max(1, math.ceil(max(end, last) / step - 1e-9))
    total = [0.0] * bins
    for n, (ts, vs) in enumerate(series):
        start = starts[n] if starts is not None else None
        lo = (max(0.0, ts[0] - step) if start is None else start) if ts else 0.0
        for hi, v in zip(ts, vs, strict=True):
            if hi > lo:
                _spread(total, lo, hi, v, step)
            lo = max(lo, hi)
    return [round((i + 1) * step, 6) for i in range(bins)], total


def _spread(total: list[float], lo: float, hi: float, rate: float, step: float) -> None:
    """Add a rate held over [lo, hi) to the bins it overlaps, each in proportion to the
    overlap (the bin's mean rate over its whole step)."""
    first = max(0, int(lo / step + 1e-9))
    for i in range(first, len(total)):
        b_lo, b_hi = i * step, (i + 1) * step
        if b_lo >= hi - 1e-12:
            break
        overlap = min(hi, b_hi) - max(lo, b_lo)
        if overlap > 0:
            total[i] += rate * overlap / step
