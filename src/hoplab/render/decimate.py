"""Fewer points for charts, same look: a browser draws a few thousand points per trace
quickly, a million slowly. Tables keep the exact figures; only charts are thinned.

min_max keeps, in each of equal-count buckets along the series, its lowest and its
highest point (in time order), plus the first and last points: every spike and every
dip survives, which an average or a stride would hide. For series sampled at a steady
rate, equal-count buckets are equal-time buckets, i.e. one per pixel column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DEFAULT_POINTS = 4000       # per trace: a wide chart has ~2000 pixel columns, two points each
CDF_POINTS = 2000

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Thinned:
    t: FloatArray
    v: FloatArray
    total: int              # points before thinning (finite ones)

    @property
    def decimated(self) -> bool:
        return len(self.t) < self.total


def _finite(t: Sequence[float] | FloatArray, v: Sequence[float] | FloatArray
            ) -> tuple[FloatArray, FloatArray]:
    ta = np.asarray(t, dtype=np.float64)
    va = np.asarray(v, dtype=np.float64)
    keep = np.isfinite(ta) & np.isfinite(va)
    if not keep.all():
        ta, va = ta[keep], va[keep]
    return ta, va


def min_max(t: Sequence[float] | FloatArray, v: Sequence[float] | FloatArray,
            max_points: int = DEFAULT_POINTS) -> Thinned:
    """At most `max_points` points of (t, v), keeping each bucket's extremes.

    Non-finite points are dropped (a chart cannot draw them). The series is taken in
    the order given; hoplab's series are in time order.
    """
    if max_points < 4:
        raise ValueError(f"max_points must be at least 4, not {max_points}")
    ta, va = _finite(t, v)
    n = len(ta)
    if n <= max_points:
        return Thinned(ta, va, n)
    idx = min_max_index(va, max_points)
    return Thinned(ta[idx], va[idx], n)


def min_max_index(v: FloatArray, max_points: int = DEFAULT_POINTS) -> npt.NDArray[np.int64]:
    """The sorted indices min_max keeps of finite values `v`: for thinning several series
    sampled together (a core's CPU states) by one of them, or by their sum."""
    if max_points < 4:
        raise ValueError(f"max_points must be at least 4, not {max_points}")
    n = len(v)
    if n <= max_points:
        return np.arange(n, dtype=np.int64)
    buckets = (max_points - 2) // 2
    size = math.ceil(n / buckets)
    whole = n // size * size
    rows = v[:whole].reshape(-1, size)
    offsets = np.arange(rows.shape[0]) * size
    picks = [offsets + rows.argmin(axis=1), offsets + rows.argmax(axis=1),
             np.array([0, n - 1])]
    if whole < n:
        tail = v[whole:]
        picks.append(np.array([whole + int(tail.argmin()), whole + int(tail.argmax())]))
    out: npt.NDArray[np.int64] = np.unique(np.concatenate(picks)).astype(np.int64)
    return out


def cdf(values: Sequence[float] | FloatArray, max_points: int = CDF_POINTS
        ) -> tuple[FloatArray, FloatArray, int]:
    """(sorted values, cumulative fraction 0..1, count) for an empirical CDF, at most
    `max_points` points taken at evenly spaced ranks: every point is an exact sample
    and its exact rank, and the minimum and maximum are always kept."""
    if max_points < 2:
        raise ValueError(f"max_points must be at least 2, not {max_points}")
    va = np.asarray(values, dtype=np.float64)
    va = np.sort(va[np.isfinite(va)])
    n = len(va)
    if n == 0:
        return va, va.copy(), 0
    ranks = np.arange(n) if n <= max_points else \
        np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
    return va[ranks], (ranks + 1) / n, n
