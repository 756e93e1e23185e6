"""What a comparison of two sets of repetitions can detect, from the measured noise.

One place answers "cannot tell" with figures: `hoplab trend` (a step too small for its
repetitions) and `hoplab bisect` (an unknown verdict at --max-repeat) both call
power_figures, so both say the same thing about the same noise.

    figures = power_figures(noise_cv([[100, 103, 98], [99, 101, 97]]), 3, 3,
                            change=0.05, alpha=0.01)
    figures.detectable      # smallest relative change found 80 % of the time at 3 vs 3
    figures.needed          # repetitions per side that a 5 % change needs

The test is the two-sided rank test of analysis/ranks.py (rank_p) at level alpha, and the
power is that test's own, under normal noise: it rejects when min(U, n_a n_b - U) is at
most the critical value ranks.critical_u gives, so the power is the chance of that with
one side shifted by change / cv noise SDs.
- A critical value below SIMULATED_BELOW (small samples, or a very low alpha): simulated,
  TRIALS draws with a seed fixed per (n_a, n_b, critical value), so every call answers
  the same. Each draw gives the shift at which that draw's test starts to reject (the
  (c+1)-th largest difference between a value of A and one of B), so one simulation
  answers every shift, and only the c + 1 highest values of A and lowest of B matter.
- Above it: U is nearly normal, with the mean and variance it has under the shift
  (Lehmann 1975, from P(a > b) and P(a > b, a > b'), the latter by Owen's T).
tests/unit/test_power.py checks the figures against a simulation of rank_p itself for
3 to 30 repetitions a side (within 2 points of power).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from hoplab.analysis.ranks import critical_u, min_p, rank_p

# Critical values below which the power is simulated: the normal approximation of U
# overstates power there, by 12 points at 5 vs 5 (p < 0.01) and still 1 at critical
# values of 20 to 50; above, by less than 1.
SIMULATED_BELOW = 50
TRIALS = 10_000           # standard error of a power: 0.004
_SEED = 20_261_123
_CHUNK = 5_000             # draws at a time, to bound memory
_SIMULATED_SIZE = 1_000    # beyond, a draw costs too much (only a level far below any
                           # in use keeps the critical value small at such sizes)
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

    def to_json(self) -> dict[str, Any]:
        """The figures for a JSON document (`hoplab bisect run --json`); a change no
        size can detect is null."""
        return {"noise_cv": self.cv, "n_a": self.n_a, "n_b": self.n_b, "alpha": self.alpha,
                "power": self.power,
                "detectable_pct": None if math.isinf(self.detectable) else
                self.detectable * 100,
                "change_pct": None if self.change is None else abs(self.change) * 100,
                "needed": self.needed}

    def describe(self) -> str:
        """One sentence for a "cannot tell" message."""
        if math.isinf(self.detectable):
            text = (f"{self.n_a} vs {self.n_b} repetitions cannot reach p < {self.alpha:.2g} "
                    "whatever the change")
        elif self.cv == 0:
            text = (f"no noise (every repetition equal): {self.n_a} vs {self.n_b} "
                    f"repetitions detect any change (p < {self.alpha:.2g})")
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
    its group's median, so a step between groups is not counted as noise. A group of
    equal repetitions has none, whatever their value (0 too). NaN without a group of two
    or more, or when every such group varies around a median of 0 (relative to 0, a
    spread has no size)."""
    total, dof = 0.0, 0
    for group in groups:
        g = np.asarray(group, dtype=float)
        if len(g) < 2:
            continue
        if np.all(g == g[0]):
            dof += len(g) - 1
            continue
        median = float(np.median(g))
        if median == 0:
            continue
        rel = g / median
        total += float(np.sum((rel - rel.mean()) ** 2))
        dof += len(g) - 1
    return math.sqrt(total / dof) if dof else math.nan


@functools.cache
def _thresholds(n_a: int, n_b: int, c: int) -> np.ndarray:
    """For TRIALS draws of normal noise (SD 1), sorted: the shift of B above A from which
    the rank test of that draw rejects in its lower tail, U <= c (U counts pairs with A's
    value above B's). U <= c once fewer than c + 1 differences a - b exceed the shift,
    so the threshold is the (c+1)-th largest difference. The i-th highest value of A
    and the j-th lowest of B are among those only if i j <= c + 1 (every pair of a
    higher A and a lower B differs more), which leaves about (c + 1) ln(c + 1) pairs."""
    rng = np.random.default_rng([_SEED, n_a, n_b, c])
    ka, kb = min(n_a, c + 1), min(n_b, c + 1)
    pairs = [(i, j) for i in range(ka) for j in range(kb) if (i + 1) * (j + 1) <= c + 1]
    high, low = (np.array(x) for x in zip(*pairs, strict=True))
    high = n_a - 1 - high                   # the i-th highest of A, in ascending order
    at = len(pairs) - (c + 1)
    out = np.empty(TRIALS)
    for lo in range(0, TRIALS, _CHUNK):
        rows = min(_CHUNK, TRIALS - lo)
        a = np.sort(rng.standard_normal((rows, n_a)), axis=1)
        b = np.sort(rng.standard_normal((rows, n_b)), axis=1)
        diff = np.take(a, high, axis=1) - np.take(b, low, axis=1)
        out[lo:lo + rows] = np.partition(diff, at, axis=1)[:, at]
    return np.sort(out)


def _normal_tail(shift: float, n_a: int, n_b: int, c: int) -> float:
    """P(U <= c) with B shifted by `shift` SDs, U taken as normal with its mean and
    variance under that shift (Lehmann)."""
    h = -shift / math.sqrt(2)
    p1 = float(special.ndtr(h))                                     # P(a > b)
    p2 = p1 - 2 * float(special.owens_t(h, math.sqrt(1 / 3)))       # P(a > b, a > b')
    cells = n_a * n_b
    var = cells * (p1 * (1 - p1) + (n_a + n_b - 2) * (p2 - p1 * p1))
    gap = c + 0.5 - cells * p1
    if var <= 0:
        return 1.0 if gap >= 0 else 0.0
    return float(special.ndtr(gap / math.sqrt(var)))


def rank_test_power(shift: float, n_a: int, n_b: int, alpha: float) -> float:
    """The chance that rank_p of n_a against n_b values is below alpha when B's values
    are A's shifted by `shift` noise SDs (normal noise): both tails of the test."""
    c = critical_u(n_a, n_b, alpha)
    if c < 0:
        return 0.0
    if c < SIMULATED_BELOW and max(n_a, n_b) <= _SIMULATED_SIZE:
        t = _thresholds(n_a, n_b, c)
        rejected = np.searchsorted(t, [shift, -shift], side="right")
        return float(rejected.sum()) / len(t)
    return min(1.0, _normal_tail(shift, n_a, n_b, c) + _normal_tail(-shift, n_a, n_b, c))


def achieved_power(change: float, cv: float, n_a: int, n_b: int, alpha: float) -> float:
    """The chance that a rank test at level alpha finds a relative `change`."""
    if min_p(n_a, n_b) > alpha or n_a < 2 or n_b < 2:
        return 0.0
    if change == 0:
        return alpha
    if cv == 0:
        # No noise: any change puts every repetition of one side above every one of the
        # other, each side a block of ties, and the test gives that arrangement's p.
        return 1.0 if rank_p([0.0] * n_a, [1.0] * n_b) < alpha else 0.0
    return rank_test_power(abs(change) / cv, n_a, n_b, alpha)


def detectable_change(cv: float, n_a: int, n_b: int, *, alpha: float = 0.01,
                      power: float = 0.8) -> float:
    """The smallest relative change a rank test of n_a against n_b repetitions finds with
    probability `power` at level alpha; inf when the sizes cannot reach alpha at all (or
    the noise is unknown), 0 when there is no noise and they can: any change is found."""
    if math.isnan(cv) or min_p(n_a, n_b) > alpha or n_a < 2 or n_b < 2:
        return math.inf
    if cv == 0:
        return 0.0 if achieved_power(1.0, 0.0, n_a, n_b, alpha) >= power else math.inf
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
