"""How a figure moves along a numeric matrix axis (hops): the least-squares slope."""

from __future__ import annotations

import math
from collections.abc import Sequence


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs; NaN with fewer than two distinct xs."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values but {len(ys)} y values")
    if len(set(xs)) < 2:
        return math.nan
    mx = math.fsum(xs) / len(xs)
    my = math.fsum(ys) / len(ys)
    num = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = math.fsum((x - mx) ** 2 for x in xs)
    return num / den
