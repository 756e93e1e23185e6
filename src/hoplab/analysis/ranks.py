"""The rank test every verdict uses, and the correction for testing many things at once.

One Mann-Whitney U test for compare's verdicts, the change points of a trend, the
adaptive verdicts of bisect and the symbols of a profile diff: exact for small samples
(n1 x n2 up to EXACT_CELLS), with ties too (the permutation distribution of the rank sum
given the ties, as R's coin or StatXact give), else the normal approximation with the
tie and continuity corrections (scipy's method="asymptotic"), never below the smallest
p the sizes allow. Ties are common in small samples of rounded figures (ping's RTT in
0.001 ms): five runs wholly above five others are p = 2/252 = 0.0079 whatever ties each
side has, where the approximation says 0.012 and a bisection at 0.01 could not decide.
Computed here rather than by scipy.stats, which costs a second to import and 1.5 ms a
call: most of a 1,000-value change-point scan.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

# Its callers find it here; sizes.py holds it, without numpy, for `hoplab check`.
from hoplab.analysis.sizes import min_p as min_p

EXACT_CELLS = 400           # n1 x n2 up to which a p without ties is exact


@functools.cache
def _u_tail(n1: int, n2: int) -> tuple[float, ...]:
    """P(U <= u) for u = 0 .. n1 n2 under no difference, from the counts of
    arrangements (Mann and Whitney's recurrence, one sample size at a time)."""
    # counts[m][u]: arrangements of i values of the first sample among m of the second
    counts = [np.zeros(n1 * n2 + 1) for _ in range(n2 + 1)]
    for m in range(n2 + 1):
        counts[m][0] = 1.0
    for _ in range(1, n1 + 1):
        new = [counts[0].copy()]
        for m in range(1, n2 + 1):
            shifted = np.zeros_like(counts[m])
            shifted[m:] = counts[m][:-m] if m else counts[m]
            new.append(new[m - 1] + shifted)
        counts = new
    dist = counts[n2]
    return tuple(np.cumsum(dist) / dist.sum())


def rank_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Mann-Whitney p of a against b (1.0 when either is empty or all tie)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n1, n2 = len(xa), len(xb)
    if n1 == 0 or n2 == 0:
        return 1.0
    x = np.concatenate([xa, xb])
    n = n1 + n2
    order = np.argsort(x, kind="stable")
    ordered = x[order]
    edges = np.flatnonzero(np.diff(ordered)) + 1
    starts = np.concatenate([[0], edges])
    sizes = np.diff(np.concatenate([starts, [n]]))
    if len(sizes) == 1:
        return 1.0
    mean_rank = starts + (sizes + 1) / 2            # average rank of each run of ties
    ranks = np.empty(n)
    ranks[order] = np.repeat(mean_rank, sizes)
    u = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    if len(sizes) < n and n1 * n2 <= EXACT_CELLS:
        return _p_with_ties(round(2 * float(ranks[:n1].sum())), n1, tuple(sizes.tolist()))
    ties = float(np.sum(sizes.astype(float) ** 3 - sizes))
    return _p_of_u(u, n1, n2, ties, exact=len(sizes) == n)


@functools.lru_cache(maxsize=4096)
def _sum_counts(n1: int, sizes: tuple[int, ...]) -> np.ndarray:
    """How many ways n1 of the values, tied in runs of `sizes` (in rank order), have each
    doubled rank sum (an index): choosing j of a run of t tied at doubled rank r adds
    j r, C(t, j) ways."""
    n = sum(sizes)
    counts = np.zeros((n1 + 1, n * (n + 1) + 1))
    counts[0, 0] = 1.0
    start = 0
    for t in sizes:
        r = 2 * start + t + 1                      # twice the run's average rank
        new = counts.copy()
        for j in range(1, min(t, n1) + 1):
            ways = math.comb(t, j)
            new[j:, j * r:] += ways * counts[:n1 + 1 - j, :counts.shape[1] - j * r]
        counts = new
        start += t
    row: np.ndarray = counts[n1]
    return row


def _p_with_ties(doubled_sum: int, n1: int, sizes: tuple[int, ...]) -> float:
    """The exact two-sided p of the first sample's doubled rank sum, given the ties: the
    share of arrangements at least as far from the mean."""
    counts = _sum_counts(n1, sizes)
    n = sum(sizes)
    mean = n1 * (n + 1)                            # doubled
    far = np.abs(np.arange(len(counts)) - mean) >= abs(doubled_sum - mean)
    return min(1.0, float(counts[far].sum() / counts.sum()))


def _p_of_u(u: float, n1: int, n2: int, ties: float, *, exact: bool) -> float:
    """The two-sided p of the statistic u (ties: the sum of t^3 - t over runs of ties;
    exact: no ties, so the exact distribution may be used)."""
    n = n1 + n2
    if exact and n1 * n2 <= EXACT_CELLS:
        tail = _u_tail(n1, n2)
        low = min(u, n1 * n2 - u)
        return min(1.0, 2 * tail[round(low)])
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    z = max(abs(u - n1 * n2 / 2) - 0.5, 0.0) / math.sqrt(var)
    return max(math.erfc(z / math.sqrt(2)), min_p(n1, n2))


@functools.cache
def critical_u(n1: int, n2: int, alpha: float) -> int:
    """The largest c for which rank_p of n1 against n2 values without ties is below
    alpha when min(U, n1 n2 - U) <= c: the test rejects exactly then. -1 when no
    arrangement reaches alpha. analysis/power.py computes the test's power from it."""
    if n1 < 1 or n2 < 1 or min_p(n1, n2) >= alpha:
        return -1
    # p grows with min(U, n1 n2 - U): find the last u below alpha by halving.
    lo, hi = -1, n1 * n2 // 2 + 1          # p(lo) < alpha (lo = -1: none yet); p(hi) >= alpha
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _p_of_u(mid, n1, n2, 0.0, exact=True) < alpha else (lo, mid)
    return lo


def benjamini_hochberg(pvalues: Sequence[float], level: float = 0.05) -> list[bool]:
    """Which of the p values are discoveries at false discovery rate `level` (step-up)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    passed = 0
    for rank, i in enumerate(order, start=1):
        if pvalues[i] <= level * rank / m:
            passed = rank
    keep = set(order[:passed])
    return [i in keep for i in range(m)]
