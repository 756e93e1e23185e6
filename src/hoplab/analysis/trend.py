"""How a figure moves: along a numeric matrix axis (hops), the least-squares slope; across
versions, its change points (analyse, whose result `hoplab trend`, the dashboard's
trend page and `hoplab report` only render)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hoplab.analysis.changepoints import ChangePoint, Detection
    from hoplab.analysis.series_trend import TrendPoint


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


# A metric across versions: where it changed (hoplab trend, the dashboard, the report).

# The step every "cannot tell" is asked about: seed 002's smallest (-5 %).
SMALL_STEP = 0.05


@dataclass(frozen=True)
class TrendChange:
    before: str | float             # the last value before the change
    after: str | float              # the first value after it
    point: ChangePoint


@dataclass(frozen=True)
class Trend:
    metric: str
    by: str
    points: tuple[TrendPoint, ...]
    changes: tuple[TrendChange, ...]
    detection: Detection


def analyse(metric: str, by: str, points: Sequence[TrendPoint]) -> Trend:
    """The change points of `points` (in their order), every repetition used."""
    from hoplab.analysis.changepoints import detect

    found = detect([p.values for p in points], change=SMALL_STEP)
    return Trend(metric=metric, by=by, points=tuple(points), detection=found,
                 changes=tuple(TrendChange(before=points[cp.index - 1].value,
                                           after=points[cp.index].value, point=cp)
                               for cp in found.change_points))


def power_note(found: Trend) -> str | None:
    """What steps may go unseen at this noise and these repetitions, or None."""
    power = found.detection.power
    if power is None:
        return None
    span = found.detection.span
    per_value = max(1, round(power.n_a / span))
    if math.isinf(power.detectable):
        text = f"no step can be told from noise with {per_value} repetition(s) per value"
    else:
        text = (f"steps smaller than {power.detectable * 100:.1f} % between stretches of "
                f"{span} values can go unseen ({power.power * 100:.0f} % power at "
                f"{power.cv * 100:.1f} % noise, {per_value} repetition(s) per value)")
    if power.change is not None:
        need = ("more repetitions than can be run" if power.needed is None else
                f"{math.ceil(power.needed / span)} repetition(s) per value")
        text += f"; a {power.change * 100:.0f} % step needs {need}"
    return text


def to_json(found: Trend) -> dict[str, Any]:
    """The `hoplab trend --json` document (issue 12's format)."""
    return {
        "metric": found.metric,
        "points": [{"value": p.value,
                    "runs": [{"id": i, "value": v} for i, v in zip(p.runs, p.values,
                                                                   strict=True)],
                    "median": p.median} for p in found.points],
        "change_points": [{"before": c.before, "after": c.after,
                           "median_before": c.point.median_before,
                           "median_after": c.point.median_after,
                           "change_pct": c.point.change_pct,
                           "ci_pct": list(c.point.ci_pct), "p": c.point.p}
                          for c in found.changes],
    }
