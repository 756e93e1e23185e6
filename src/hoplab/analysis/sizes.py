"""How many runs a side a verdict needs: the smallest p the rank test can give with given
sizes, and from it the fewest runs a side that can reach a level. Plain arithmetic (no
numpy), so that `hoplab check` can say it without loading the statistics."""

from __future__ import annotations

import math

ALPHA = 0.05                # compare's default level
# p values from scipy land a few ulps either side of exact fractions such as 0.1.
P_SLACK = 1e-9


def min_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p a rank test of n_a against n_b can give: every value of
    one side above every value of the other."""
    if n_a < 1 or n_b < 1:
        return 1.0
    if n_a + n_b > 100:
        # Far below any level; math.comb's exact integer costs milliseconds at thousands
        # of repetitions (power.py asks for those).
        return 2 * math.exp(math.lgamma(n_a + 1) + math.lgamma(n_b + 1)
                            - math.lgamma(n_a + n_b + 1))
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def runs_per_side(alpha: float = ALPHA) -> int:
    """The fewest runs a side with which the rank test can reach p <= alpha at all (4 at
    0.05: 3 + 3 cannot go below p = 0.1): the one figure every note and `hoplab check`
    give for how many repetitions a verdict needs (analysis/verdict_rule.py judges by
    the same min_p)."""
    level = alpha * (1 + P_SLACK)
    return next(n for n in range(2, 10_000) if min_p(n, n) <= level)


def can_reach(n_a: int, n_b: int, alpha: float = ALPHA) -> bool:
    """Whether n_a against n_b runs can give better or worse at all."""
    return min(n_a, n_b) >= 2 and min_p(n_a, n_b) <= alpha * (1 + P_SLACK)
