"""Power figures against a simulation of the rank test they describe."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from hoplab.analysis.power import (
    detectable_change,
    noise_cv,
    power_figures,
    repetitions_needed,
)
from hoplab.analysis.ranks import min_p


def _simulated_power(change: float, cv: float, n_a: int, n_b: int, alpha: float,
                     trials: int = 4000) -> float:
    rng = np.random.default_rng(7)
    a = rng.normal(1.0, cv, (trials, n_a))
    b = rng.normal(1.0 + change, cv, (trials, n_b))
    p = stats.mannwhitneyu(a, b, alternative="two-sided", axis=1).pvalue
    return float(np.mean(p < alpha))


@pytest.mark.parametrize(("n_a", "n_b", "alpha"), [(6, 6, 0.01), (12, 12, 0.01),
                                                   (30, 30, 0.001), (9, 60, 0.01)])
def test_detectable_change_is_found_80_percent_of_the_time(n_a, n_b, alpha):
    cv = 0.05
    change = detectable_change(cv, n_a, n_b, alpha=alpha, power=0.8)
    assert 0 < change < 0.2
    assert _simulated_power(change, cv, n_a, n_b, alpha) == pytest.approx(0.8, abs=0.05)
    # Half the change is found far less often: the figure is not "anything".
    assert _simulated_power(change / 2, cv, n_a, n_b, alpha) < 0.45


def test_repetitions_needed_reach_the_power_and_one_fewer_does_not():
    cv, change = 0.05, 0.05
    n = repetitions_needed(change, cv, alpha=0.01)
    assert n is not None
    assert detectable_change(cv, n, n, alpha=0.01) <= change < detectable_change(
        cv, n - 1, n - 1, alpha=0.01)
    assert _simulated_power(change, cv, n, n, 0.01) == pytest.approx(0.8, abs=0.06)


def test_sizes_that_cannot_reach_the_level_detect_nothing():
    assert min_p(3, 3) == pytest.approx(0.1)
    assert math.isinf(detectable_change(0.05, 3, 3, alpha=0.01))
    text = power_figures(0.05, 3, 3, change=0.05, alpha=0.01).describe()
    assert "cannot reach p < 0.01" in text and "needs" in text


def test_noise_cv_leaves_steps_between_groups_out():
    rng = np.random.default_rng(1)
    groups = [list(rng.normal(level, level * 0.05, 400)) for level in (100, 200, 51)]
    assert noise_cv(groups) == pytest.approx(0.05, rel=0.05)
    assert math.isnan(noise_cv([[1.0], [2.0]]))
