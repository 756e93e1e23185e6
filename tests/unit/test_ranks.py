"""The one rank test and false-discovery correction (hoplab.analysis.ranks)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hoplab.analysis.ranks import EXACT_CELLS, benjamini_hochberg, critical_u, min_p, rank_p


@pytest.mark.parametrize(("n1", "n2", "shift"), [(9, 30, 0.0), (30, 30, 1.5), (60, 9, 0.5),
                                                 (3, 40, 1.5)])
def test_the_rank_test_is_scipys(n1: int, n2: int, shift: float) -> None:
    from scipy import stats

    rng = np.random.default_rng(n1 + n2)
    a, b = rng.normal(0, 1, n1), rng.normal(shift, 1, n2)
    a[:3], b[:3] = np.round(a[:3]), np.round(b[:3])       # ties
    if n1 * n2 > EXACT_CELLS:       # smaller ones with ties: the test below
        assert rank_p(a, b) == pytest.approx(
            stats.mannwhitneyu(a, b, method="asymptotic").pvalue, rel=1e-9)
    # Small samples without ties: the exact distribution, as scipy's method="exact".
    a, b = rng.normal(0, 1, 12), rng.normal(shift, 1, 6)
    assert rank_p(a, b) == pytest.approx(
        stats.mannwhitneyu(a, b, method="exact").pvalue, rel=1e-9)
    # Never below what the sizes allow: three values all above three others give 0.081
    # by the approximation, 2 / C(6, 3) = 0.1 exactly.
    assert rank_p(np.array([5.0, 6, 7]), np.array([1.0, 2, 3])) == pytest.approx(0.1)


def test_small_samples_with_ties_are_exact() -> None:
    # Five runs wholly above five others: 2 arrangements of C(10, 5) = 252 are as far,
    # whatever ties each side has (the approximation said 0.012: a bisection at 0.01 could
    # not name a commit from five runs a side of a figure rounded to 0.001 ms).
    assert rank_p([10.1, 10.1, 10.2, 10.3, 10.3], [20.0, 20.0, 20.1, 20.2, 20.2]) == \
        pytest.approx(2 / 252, rel=1e-12)
    # Against every arrangement counted one by one, ties across the samples too.
    rng = np.random.default_rng(7)
    for _ in range(60):
        n1, n2 = (int(v) for v in rng.integers(1, 8, 2))
        x = rng.integers(0, 5, n1 + n2).astype(float)
        if len(set(x)) == 1:
            continue
        ranks = _midranks(x)
        mean, seen = n1 * (n1 + n2 + 1) / 2, ranks[:n1].sum()
        sums = [ranks[list(c)].sum() for c in itertools.combinations(range(n1 + n2), n1)]
        want = sum(abs(v - mean) >= abs(seen - mean) - 1e-9 for v in sums) / len(sums)
        assert rank_p(x[:n1], x[n1:]) == pytest.approx(want, rel=1e-12), (x, n1)


def _midranks(x: np.ndarray) -> np.ndarray:
    return np.array([np.sum(x < v) + (np.sum(x == v) + 1) / 2 for v in x])


def test_benjamini_hochberg_keeps_what_the_step_up_rule_keeps() -> None:
    # Sorted p: 0.001 <= 0.05*1/5, 0.008 <= 0.02, 0.039 > 0.03, 0.041 > 0.04, 0.2 > 0.05;
    # the largest rank passing is 2.
    assert benjamini_hochberg([0.041, 0.001, 0.2, 0.008, 0.039], 0.05) == [
        False, True, False, True, False]
    # Step-up: rank 3 passes (0.03 <= 0.03) and carries rank 2 (0.025 > 0.02) with it.
    assert benjamini_hochberg([0.001, 0.025, 0.03], 0.05) == [True, True, True]


def test_benjamini_hochberg_steps_up() -> None:
    # m = 3, FDR 5 %: thresholds 1.67 %, 3.33 %, 5 %; the largest p under its threshold
    # (0.045 <= 5 %) takes every smaller one with it, even 0.04 > 3.33 %.
    assert benjamini_hochberg([0.001, 0.04, 0.045]) == [True, True, True]
    assert benjamini_hochberg([0.001, 0.04, 0.06]) == [True, False, False]
    assert benjamini_hochberg([0.01, 0.5, 0.02, 0.03]) == [True, False, True, True]
    assert benjamini_hochberg([]) == []


def test_min_p_and_degenerate_samples() -> None:
    assert [min_p(n, n) for n in (1, 2, 3, 4)] == pytest.approx([1, 1 / 3, 0.1, 1 / 35])
    assert min_p(0, 5) == 1.0
    assert rank_p([], [1.0, 2.0]) == 1.0
    assert rank_p([3.0, 3.0], [3.0, 3.0, 3.0]) == 1.0
    # Five a side, all apart: the exact p compare's verdicts rest on, 2 / C(10, 5).
    assert rank_p([1.0, 2, 3, 4, 5], [6.0, 7, 8, 9, 10]) == pytest.approx(2 / 252)


def _with_u(u: int, n1: int, n2: int) -> tuple[list[float], list[float]]:
    """n1 and n2 values without ties whose statistic (pairs with the first side's value
    above the second's) is u."""
    b = [float(j) for j in range(n2)]
    a: list[float] = []
    for _ in range(n1):
        above = min(u, n2)            # this value of A exceeds `above` values of B
        a.append(above - 0.5 + len(a) * 1e-6)
        u -= above
    assert u == 0
    return a, b


@pytest.mark.parametrize(("n1", "n2", "alpha"), [(5, 5, 0.01), (8, 8, 0.01), (10, 20, 0.01),
                                                 (12, 12, 1e-4), (25, 25, 0.01),
                                                 (40, 40, 1e-5)])
def test_critical_u_is_where_rank_p_falls_below_alpha(n1, n2, alpha):
    c = critical_u(n1, n2, alpha)
    assert c >= 0
    # At c the test rejects, one above it does not, in both tails: the power
    # arithmetic (analysis/power.py) rests on this.
    for u, rejects in ((c, True), (c + 1, False), (n1 * n2 - c, True),
                       (n1 * n2 - c - 1, False)):
        a, b = _with_u(u, n1, n2)
        assert bool(rank_p(a, b) < alpha) is rejects, (u, rank_p(a, b))


def test_critical_u_is_none_when_the_sizes_cannot_reach_alpha():
    assert critical_u(4, 4, 0.01) == -1 and critical_u(3, 3, 0.1) == -1
    assert critical_u(5, 5, 0.01) == 0                 # 2 / 252 only
