"""What a comparison of two sets of repetitions can detect, from the measured noise.

One place answers "cannot tell" with figures: `hoplab trend` (a step too small for its
repetitions) and `hoplab bisect` (an unknown verdict at --max-repeat) both call
power_figures, so both say the same thing about the same noise.

    figures = power_figures(noise_cv([[100, 103, 98], [99, 101, 97]]), 3, 3,
                            change=0.05, alpha=0.01)
    figures.detectable      # smallest relative change found 80 % of the time at 3 vs 3
    figures.needed          # repetitions per side that a 5 % change needs

The test is a two-sided rank test (Mann-Whitney) at level alpha; its power is that of
Student's t-test (noncentral t) with each side's size scaled by the rank test's
efficiency relative to t under normal noise, 3/pi. tests/unit/test_power.py checks the
figures against a simulation of the rank test itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from hoplab.analysis.ranks import min_p

# Mann-Whitney's asymptotic relative efficiency against the t-test for normal noise.
RANK_EFFICIENCY = 3 / math.pi
_MAX_REPETITIONS = 100_000


@dataclass(frozen=True)
class Power:
    cv: float                  # noise: coefficient of variation of one repetition
    n_a: int
    n_b: int
    alpha: float               # two-sided level of the test
    power: float               # wanted chance of detecting a change
    detectable: float          # smallest relative change detectable (0.05 = 5 %); inf if none
    change: float | None       # the change asked about, if any
    needed: int | None         # repetitions per side that `change` needs (None: not asked,
                               # or more than _MAX_REPETITIONS)

    def describe(self) -> str:
        """One sentence for a "cannot tell" message."""
        if math.isinf(self.detectable):
            text = (f"{self.n_a} vs {self.n_b} repetitions cannot reach p < {self.alpha:.2g} "
                    "whatever the change")
        else:
            text = (f"smallest change detectable with {self.n_a} vs {self.n_b} repetitions "
                    f"at {self.cv * 100:.1f} % noise: {self.detectable * 100:.1f} % "
                    f"({self.power * 100:.0f} % power, p < {self.alpha:.2g})")
        if self.change is not None:
            need = (f"{self.needed} repetitions per side" if self.needed is not None
                    else f"more than {_MAX_REPETITIONS} repetitions per side")
            text += f"; a {abs(self.change) * 100:.1f} % change needs {need}"
        return text


def noise_cv(groups: Sequence[Sequence[float]]) -> float:
    """The coefficient of variation of one repetition, pooled over groups (a version, a
    commit) that each hold repetitions of one true value: each repetition relative to
    its group's median, so a step between groups is not counted as noise. NaN without a
    group of two or more."""
    total, dof = 0.0, 0
    for group in groups:
        g = np.asarray(group, dtype=float)
        if len(g) < 2:
            continue
        rel = g / float(np.median(g))
        total += float(np.sum((rel - rel.mean()) ** 2))
        dof += len(g) - 1
    return math.sqrt(total / dof) if dof else math.nan


def _t_power(change: float, cv: float, n_a: float, n_b: float, alpha: float) -> float:
    # scipy.special, not scipy.stats: the same functions, without a second of import
    # that `hoplab trend` would pay on every call.
    dof = max(n_a + n_b - 2, 1.0)
    ncp = change / (cv * math.sqrt(1 / n_a + 1 / n_b))
    crit = float(special.stdtrit(dof, 1 - alpha / 2))
    exact = float(1 - special.nctdtr(dof, ncp, crit) + special.nctdtr(dof, ncp, -crit))
    if math.isfinite(exact) and 0 <= exact <= 1:
        return exact
    # The noncentral t's CDF gives NaN for some large ncp and dof; there the normal
    # approximation of the noncentral t (Johnson and Welch) is within 0.01 of it.
    return float(special.ndtr((ncp - crit) / math.sqrt(1 + crit**2 / (2 * dof))))


def achieved_power(change: float, cv: float, n_a: int, n_b: int, alpha: float) -> float:
    """The chance that a rank test at level alpha finds a relative `change`."""
    if min_p(n_a, n_b) > alpha or n_a < 2 or n_b < 2:
        return 0.0
    if change == 0:
        return alpha
    return _t_power(abs(change), cv, n_a * RANK_EFFICIENCY, n_b * RANK_EFFICIENCY, alpha)


def detectable_change(cv: float, n_a: int, n_b: int, *, alpha: float = 0.01,
                      power: float = 0.8) -> float:
    """The smallest relative change a rank test of n_a against n_b repetitions finds with
    probability `power` at level alpha; inf when the sizes cannot reach alpha at all."""
    if not cv > 0 or min_p(n_a, n_b) > alpha or n_a < 2 or n_b < 2:
        return math.inf if cv > 0 or math.isnan(cv) else 0.0
    lo, hi = 0.0, cv
    while achieved_power(hi, cv, n_a, n_b, alpha) < power:
        lo, hi = hi, hi * 2
    # Power grows with the change: halve the bracket to a millionth of the noise.
    while hi - lo > cv * 1e-6:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if achieved_power(mid, cv, n_a, n_b, alpha) < power else (lo, mid)
    return hi


def repetitions_needed(change: float, cv: float, *, alpha: float = 0.01,
                       power: float = 0.8) -> int | None:
    """Repetitions per side (both sides alike) for a rank test to find a relative
    `change` with probability `power`; None past _MAX_REPETITIONS."""
    if change == 0:
        return None

    def enough(n: int) -> bool:
        return achieved_power(change, cv, n, n, alpha) >= power

    lo, hi = 1, 2
    while not enough(hi):
        lo, hi = hi, hi * 2
        if hi > _MAX_REPETITIONS:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def power_figures(cv: float, n_a: int, n_b: int, *, change: float | None = None,
                  alpha: float = 0.01, power: float = 0.8) -> Power:
    """Both figures a "cannot tell" gives: the smallest change detectable with n_a against
    n_b repetitions, and (given a relative `change`) the repetitions per side it needs."""
    return Power(cv=cv, n_a=n_a, n_b=n_b, alpha=alpha, power=power,
                 detectable=detectable_change(cv, n_a, n_b, alpha=alpha, power=power),
                 change=change,
                 needed=None if change is None else repetitions_needed(
                     change, cv, alpha=alpha, power=power))
