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
    b = ([0.21, 0.41, 0.61], [5.0, 5.0, 5.0])  # started 10 ms later: 5 % in the next bin
    c = ([0.39, 0.59], [1.0, 1.0])             # started 190 ms later
    t, v = binned_sum([a, b, c], 0.2, 0.8)
    assert t == [0.2, 0.4, 0.6, 0.8]
    assert v == pytest.approx([10 + 4.75 + 0.05, 10 + 5 + 1.0, 10 + 5 + 0.95, 0.25])


def test_binned_sum_spreads_a_short_last_interval_over_its_span() -> None:
    # [0.4, 0.45) at 30 is a quarter of the bin [0.4, 0.6): its mean rate there is 7.5.
    t, v = binned_sum([([0.2, 0.4, 0.45], [10.0, 20.0, 30.0])], 0.2, 0.4)
    assert t == [0.2, 0.4, 0.6]
    assert v == pytest.approx([10.0, 20.0, 7.5])


@pytest.mark.parametrize("start", [0.5, 1.5, 0.3, 0.7])
def test_binned_sum_keeps_every_sample_of_a_flow_started_off_the_grid(start: float) -> None:
    # A flow started at an odd multiple of 0.1 s: its 0.2 s interval ends fall exactly
    # between grid points. Rounding them put two intervals in one bin and none in the
    # next (18 of 50 bins empty, mean 6.4 instead of 10).
    ends = [start + 0.2 * (i + 1) for i in range(50)]
    t, v = binned_sum([(ends, [10.0] * 50)], 0.2, start + 10.0)
    inside = [x for e, x in zip(t, v, strict=True)
              if start - 1e-9 <= e - 0.2 and e <= start + 10.0 + 1e-9]
    assert len(inside) == 49  # the two half-covered edge bins are left out
    assert min(inside) == pytest.approx(10.0) and max(inside) == pytest.approx(10.0)
    # Every byte is kept: 10 bit/s for 10 s.
    assert math.fsum(v) * 0.2 == pytest.approx(100.0)


def test_slope_of_a_line_and_of_noise() -> None:
    from hoplab.analysis.trend import slope

    assert slope([1, 2, 3, 4], [10.0, 8.0, 6.0, 4.0]) == pytest.approx(-2.0)
    assert slope([1, 1, 2, 2], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(1.0)
    assert math.isnan(slope([3, 3], [1.0, 2.0]))
    with pytest.raises(ValueError):
        slope([1, 2], [1.0])


def test_binned_sum_first_interval_starts_when_the_tool_started() -> None:
    # The first interval ran 0.25 s (started at 0.15): its bytes are 10 * 0.25, not 10 * 0.2.
    _t, v = binned_sum([([0.4, 0.6], [10.0, 10.0])], 0.2, 0.6, starts=[0.15])
    assert v == pytest.approx([2.5, 10.0, 10.0])
