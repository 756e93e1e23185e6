"""Statistics with known answers."""

from __future__ import annotations

import math

import pytest

from hoplab.analysis.stats import (
    binned_sum,
    bufferbloat_grade,
    jain_index,
    mean_abs_diff,
    median,
    percentile,
)


def test_percentile_interpolates_like_numpy() -> None:
    values = [15.0, 20.0, 35.0, 40.0, 50.0]
    assert percentile(values, 0) == 15.0
    assert percentile(values, 100) == 50.0
    assert percentile(values, 40) == pytest.approx(29.0)   # numpy.percentile(..., 40)
    assert median([3.0, 1.0, 2.0, 10.0]) == 2.5
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_jain_index_bounds() -> None:
    assert jain_index([5.0, 5.0, 5.0, 5.0]) == pytest.approx(1.0)
    assert jain_index([10.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    # Seed 004 without shaping: host B with one of four flows gets a quarter.
    assert jain_index([0.75, 0.25]) == pytest.approx(0.8)


@pytest.mark.parametrize(("ms", "grade"), [(0.4, "A+"), (4.99, "A+"), (5.0, "A"), (29.0, "A"),
                                          (59.0, "B"), (150.0, "C"), (399.0, "D"),
                                          (400.0, "F"), (2000.0, "F")])
def test_bufferbloat_grades(ms: float, grade: str) -> None:
    assert bufferbloat_grade(ms) == grade


def test_jitter_is_mean_consecutive_difference() -> None:
    assert mean_abs_diff([10.0, 12.0, 11.0, 15.0]) == pytest.approx((2 + 1 + 4) / 3)
    assert math.isnan(mean_abs_diff([1.0]))


def test_binned_sum_adds_flows_on_one_grid() -> None:
    a = ([0.2, 0.4, 0.6], [10.0, 10.0, 10.0])
    b = ([0.21, 0.41, 0.61], [5.0, 5.0, 5.0])  # started 10 ms later: the same steps
    c = ([0.39, 0.59], [1.0, 1.0])             # started 190 ms later: one step later
    t, v = binned_sum([a, b, c], 0.2, 0.8)
    assert t == [0.2, 0.4, 0.6, 0.8]
    assert v == [15.0, 16.0, 16.0, 0.0]


def test_binned_sum_averages_two_samples_of_one_flow_in_a_bin() -> None:
    _t, v = binned_sum([([0.2, 0.4, 0.45], [10.0, 20.0, 30.0])], 0.2, 0.4)
    assert v == [10.0, 25.0]


def test_slope_of_a_line_and_of_noise() -> None:
    from hoplab.analysis.trend import slope

    assert slope([1, 2, 3, 4], [10.0, 8.0, 6.0, 4.0]) == pytest.approx(-2.0)
    assert slope([1, 1, 2, 2], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(1.0)
    assert math.isnan(slope([3, 3], [1.0, 2.0]))
    with pytest.raises(ValueError):
        slope([1, 2], [1.0])
