"""Thinning for charts: extremes survive, the point budget holds, CDF points are exact."""

from __future__ import annotations

import numpy as np
import pytest

from hoplab.render.decimate import cdf, min_max, min_max_index


def test_known_answer_small() -> None:
    v = [0.0, 5, 1, 2, 9, 3, 4, 8, 6, 7]
    thin = min_max(list(range(10)), v, max_points=6)
    # Two buckets of five: (min 0 @0, max 9 @4), (min 3 @5, max 8 @7), plus the last point.
    assert thin.t.tolist() == [0, 4, 5, 7, 9]
    assert thin.v.tolist() == [0, 9, 3, 8, 7]
    assert thin.total == 10 and thin.decimated


def test_million_points_keep_spike_and_dip_within_budget() -> None:
    n = 1_000_000
    t = np.arange(n, dtype=np.float64) * 0.001
    v = np.sin(t) + 5.0
    v[123_457] = 250.0
    v[654_321] = -40.0
    thin = min_max(t, v, max_points=4000)
    assert len(thin.t) <= 4000
    assert thin.total == n
    spike = np.flatnonzero(thin.v == 250.0)
    dip = np.flatnonzero(thin.v == -40.0)
    assert thin.t[spike].tolist() == [t[123_457]]
    assert thin.t[dip].tolist() == [t[654_321]]
    assert thin.t[0] == t[0] and thin.t[-1] == t[-1]
    assert np.all(np.diff(thin.t) > 0)           # still in time order


@pytest.mark.parametrize("n", [5, 3999, 4000, 4001, 10_007, 123_456])
def test_budget_holds_for_any_length(n: int) -> None:
    v = np.random.default_rng(n).normal(size=n)
    idx = min_max_index(v, 4000)
    assert len(idx) <= 4000
    assert v[idx].max() == v.max() and v[idx].min() == v.min()
    if n <= 4000:
        assert len(idx) == n


def test_short_series_unchanged_and_non_finite_dropped() -> None:
    thin = min_max([0.0, 1.0, 2.0, 3.0], [1.0, float("nan"), 3.0, float("inf")])
    assert thin.t.tolist() == [0.0, 2.0] and thin.v.tolist() == [1.0, 3.0]
    assert not thin.decimated
    with pytest.raises(ValueError):
        min_max([1.0], [1.0], max_points=3)


def test_cdf_points_are_exact_samples_at_their_ranks() -> None:
    values = np.random.default_rng(1).exponential(size=100_000)
    x, y, n = cdf(values, max_points=500)
    assert n == 100_000 and len(x) <= 500
    ordered = np.sort(values)
    assert x[0] == ordered[0] and x[-1] == ordered[-1]
    assert y[-1] == 1.0
    ranks = np.round(y * n).astype(int) - 1
    assert np.array_equal(x, ordered[ranks])


def test_cdf_small_and_empty() -> None:
    x, y, n = cdf([3.0, 1.0, 2.0, float("nan")])
    assert x.tolist() == [1.0, 2.0, 3.0] and n == 3
    assert y.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert cdf([])[2] == 0
