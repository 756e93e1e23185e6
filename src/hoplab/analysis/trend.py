"""How a figure moves: along a numeric matrix axis (hops), the least-squares slope; across
versions, its change points (analyse, whose result `hoplab trend`, the dashboard's
trend page and `hoplab report` only render)."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hoplab import metrics as registry
from hoplab.analysis.order import natural_key
from hoplab.analysis.verdicts import NOT_ENOUGH, word

if TYPE_CHECKING:
    from hoplab.analysis.changepoints import ChangePoint, Detection
    from hoplab.analysis.series_trend import TrendPoint
    from hoplab.record import RunRecord


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
    title: str = ""                 # what tells this series from others: its test
                                    # (experiment/test) or variant (gro=on), when several


def _trend(metric: str, by: str, points: Sequence[TrendPoint], found: Detection,
           title: str = "") -> Trend:
    return Trend(metric=metric, by=by, points=tuple(points), detection=found, title=title,
                 changes=tuple(TrendChange(before=points[cp.index - 1].value,
                                           after=points[cp.index].value, point=cp)
                               for cp in found.change_points))


def analyse(metric: str, by: str, points: Sequence[TrendPoint], *,
            detector: str | None = None, title: str = "") -> Trend:
    """The change points of `points` (in their order), every repetition used, placed by
    the registered `detector` (analysis/detectors; None: its default)."""
    from hoplab.analysis.changepoints import detect

    found = detect([p.values for p in points], detector=detector, change=SMALL_STEP)
    return _trend(metric, by, points, found, title)


def analyse_many(by: str, points: Mapping[str, Sequence[TrendPoint]], *,
                 detector: str | None = None) -> list[Trend]:
    """analyse for several metrics of the same runs, with a Benjamini-Hochberg correction
    across all their change points (analysis/changepoints.py detect_many)."""
    from hoplab.analysis.changepoints import detect_many

    found = detect_many({m: [p.values for p in pts] for m, pts in points.items()},
                        detector=detector, change=SMALL_STEP)
    return [_trend(m, by, pts, found[m]) for m, pts in points.items()]


# Labels that say where and how a run ran (a fleet's bench, its job), never what was
# measured: their values are no history a figure changes along.
NOT_A_HISTORY = frozenset({"bench", "fleet_job"})


def series_key(runs: Sequence[RunRecord]) -> str | None:
    """The key a set of runs is a series along, for the report: a label (not one of
    NOT_A_HISTORY), else a variant key, that takes enough values for a change point on
    each side (2 x MIN_SIZE + 1), "version" or "commit" first; None when there is none
    or several."""
    from hoplab.analysis.changepoints import MIN_SIZE

    labels = sorted({k for r in runs for k in r.labels} - NOT_A_HISTORY)
    for keys in (("version", "commit"), labels,
                 sorted({k for r in runs for k in r.variant})):
        many = [k for k in keys if len({json.dumps(r.labels.get(k, r.variant.get(k)))
                                        for r in runs} - {"null"}) > 2 * MIN_SIZE]
        if len(many) == 1:
            return many[0]
        if len(many) > 1:
            return None
    return None


def _report_series(runs: Sequence[RunRecord], by: str
                   ) -> list[tuple[str, str, list[RunRecord]]]:
    """The report's series along `by`: (experiment/test, the other variant keys that
    vary among that test's runs, as "gro=on", its finished runs), in order. Runs of
    gro=on and gro=off are two measurements, not one series (as compare pairs them)."""
    tests: dict[str, list[RunRecord]] = {}
    for r in runs:
        if r.status == "ok" and (r.labels.get(by) or r.variant.get(by)) is not None:
            tests.setdefault(f"{r.experiment}/{r.test}", []).append(r)
    out: dict[tuple[str, str], list[RunRecord]] = {}
    for test, members in tests.items():
        keys = sorted({k for r in members for k in r.variant if k != by})
        split = [k for k in keys if len({json.dumps(r.variant.get(k)) for r in members}) > 1]
        for r in members:
            value = [r.variant.get(k) for k in split]
            label = " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                             for k, v in zip(split, value, strict=True))
            out.setdefault((test, label), []).append(r)
    return [(test, label, members) for (test, label), members in
            sorted(out.items(), key=lambda kv: (kv[0][0], natural_key(kv[0][1])))]


def trends_of_runs(runs: Sequence[RunRecord]) -> list[Trend]:
    """The report's trends: for each experiment/test (and each value of the other
    variant keys that vary), every registered whole-run metric along series_key, in
    natural order, corrected across metrics; [] if no series."""
    from hoplab.analysis.series_trend import TrendPoint

    by = series_key(runs)
    if by is None:
        return []
    out = []
    for test, label, members in _report_series(runs, by):
        names = sorted({m.name for r in members for m in r.metrics
                        if m.flow is None and m.node is None and m.key is None
                        and registry.find(m.name) is not None})
        per_metric: dict[str, list[TrendPoint]] = {}
        for name in names:
            rows: dict[Any, list[tuple[int, float, float]]] = {}
            for r in members:
                value = r.metric(name)
                if value is not None and math.isfinite(value):
                    x = r.labels.get(by, r.variant.get(by))
                    rows.setdefault(x, []).append((r.id or 0, value, r.started_at))
            pts = [TrendPoint(value=x, runs=tuple(i for i, _, _ in v),
                              values=tuple(y for _, y, _ in v),
                              started_at=min(t for _, _, t in v), tests=frozenset({test}))
                   for x, v in sorted(rows.items(), key=lambda kv: natural_key(kv[0]))]
            if len(pts) > 1:
                per_metric[name] = pts
        title = f"{test} {label}".strip()
        out += [dataclasses.replace(t, title=title) for t in analyse_many(by, per_metric)]
    return out


def _per_value(found: Trend) -> tuple[int, int | None] | None:
    """Repetitions per value the power figures are at, and those a SMALL_STEP step
    needs (None: more than can be run); None without power figures."""
    power = found.detection.power
    if power is None:
        return None
    span = found.detection.span
    return (max(1, round(power.n_a / span)),
            None if power.needed is None else math.ceil(power.needed / span))


def cannot_tell(found: Trend) -> str | None:
    """Why no step can be found at all in a series this short, or None."""
    if not found.detection.too_short:
        return None
    text = f"{word(NOT_ENOUGH)}: {found.detection.reason}"
    if len(found.points) == 2:
        # The series' own variant (its title, "gro=on hops=2") narrows both sides.
        same = "".join(f",{w}" for w in found.title.split() if "=" in w)
        a, b = (f"{found.by}={shown(p.value, found.by)}{same}" for p in found.points)
        text += f"; `hoplab compare {a} {b}` compares two values"
    return text


def power_note(found: Trend) -> str | None:
    """What steps may go unseen at this noise and these repetitions, or why that cannot
    be said; None when the series is too short for any step (cannot_tell says so)."""
    power, reps = found.detection.power, _per_value(found)
    if found.detection.too_short:
        return None
    if power is None or reps is None:
        return f"no power figures: {found.detection.reason}"
    span = found.detection.span
    per_value, needed = reps
    if math.isinf(power.detectable):
        text = f"no step can be told from noise with {per_value} repetition(s) per value"
    elif power.cv == 0:
        text = (f"no noise (every value's repetitions are equal): any step between "
                f"stretches of {span} values is seen, at {per_value} repetition(s) per value")
    else:
        text = (f"steps smaller than {power.detectable * 100:.1f} % between stretches of "
                f"{span} values can go unseen ({power.power * 100:.0f} % power at "
                f"{power.cv * 100:.1f} % noise, {per_value} repetition(s) per value)")
    if power.change is not None:
        need = ("more repetitions than can be run" if needed is None else
                f"{needed} repetition(s) per value")
        text += f"; a {power.change * 100:.0f} % step needs {need}"
    return text


def power_json(found: Trend) -> dict[str, Any] | None:
    """power_note's figures for `trend --json`: the smallest step detectable between two
    stretches of `values_per_stretch` values at these repetitions, and the repetitions
    per value a step of `step_pct` would need."""
    power, reps = found.detection.power, _per_value(found)
    if power is None or reps is None:
        return None
    return {"noise_cv": power.cv, "values_per_stretch": found.detection.span,
            "repetitions_per_value": reps[0], "power": power.power, "alpha": power.alpha,
            "detectable_pct": power.detectable * 100,
            "step_pct": None if power.change is None else abs(power.change) * 100,
            "step_repetitions_per_value": reps[1]}


def shown(value: str | float, by: str) -> str:
    """A value as tables and plots name it: a start time as local date and time."""
    if by == "started_at" and isinstance(value, float):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    return f"{value:g}" if isinstance(value, float) else value


def to_json(found: Trend) -> dict[str, Any]:
    """The `hoplab trend --json` document of one series: issue 12's format, plus the
    power figures (each change point's detectable_pct, and power: power_json), why
    there are none (reason) and the detector's name."""
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
                           "ci_pct": list(c.point.ci_pct), "p": c.point.p,
                           "detectable_pct": c.point.detectable_pct}
                          for c in found.changes],
        "power": power_json(found),
        "reason": found.detection.reason,
        "detector": found.detection.detector,
    }
