"""What a scheduled firing changed: its runs against the previous firing's, and the
schedule's history, judged by the one analysis path (nothing here decides a verdict).

- compare_groups (analysis/groups.py), as `hoplab compare PREVIOUS THIS` would judge
  the two firings' runs: every figure, test by test and variant by variant;
- the latest change point of each headline figure over the schedule's history (each
  firing one value, in time order), as `hoplab trend` and the dashboard's "what
  changed" find it (analysis/changes.py latest_step), when it lands on this firing and
  compare did not already call that figure worse.

A figure is reported when the analysis calls it worse; failed runs are listed beside.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from hoplab import kinds
from hoplab import metrics as registry
from hoplab.analysis import verdicts
from hoplab.analysis.changes import Series, latest_step, points, series_of
from hoplab.analysis.groups import compare_groups
from hoplab.errors import UsageError
from hoplab.kind_registry import HEADLINES
from hoplab.store import RunSummary, Store


@dataclass(frozen=True)
class Worse:
    """One figure that got worse: the fields of an alert's `changes` entry."""

    experiment: str
    test: str
    variant: dict[str, Any]
    metric: str                      # as compare names it: goodput, goodput[flow=up]
    unit: str
    before: float                    # medians, in the metric's unit
    after: float
    change_pct: float
    ci_pct: tuple[float, float]
    p: float | None
    runs_before: tuple[int, ...]
    runs_after: tuple[int, ...]
    source: str                      # "compare" (this firing against the previous one)
                                     # or "step" (a change point of the history)


@dataclass(frozen=True)
class Failed:
    run: int
    test: str
    variant: dict[str, Any]
    status: str
    error: str


@dataclass(frozen=True)
class Verdict:
    worse: tuple[Worse, ...] = ()
    failed: tuple[Failed, ...] = ()
    notes: tuple[str, ...] = field(default=())   # why something could not be judged


def compare_url(base: str | None, before: Sequence[int], after: Sequence[int]) -> str:
    """The dashboard's comparison of two sets of runs (web/app.py's /compare?a=&b=),
    under `base` (--dashboard-url) or relative."""
    query = urlencode({"a": ",".join(map(str, sorted(before))),
                       "b": ",".join(map(str, sorted(after)))})
    return f"{(base or '').rstrip('/')}/compare?{query}"


def change_json(w: Worse, base: str | None) -> dict[str, Any]:
    """An alert's `changes` entry (docs/schedules.md)."""
    return {"experiment": w.experiment, "test": w.test, "variant": w.variant,
            "metric": w.metric, "unit": w.unit, "before": w.before, "after": w.after,
            "change_pct": w.change_pct, "ci_pct": list(w.ci_pct), "p": w.p,
            "runs_before": list(w.runs_before), "runs_after": list(w.runs_after),
            "url": compare_url(base, w.runs_before, w.runs_after)}


def _compared(store: Store, before: Sequence[RunSummary], after: Sequence[RunSummary]
              ) -> tuple[list[Worse], list[str]]:
    trials = registry.trial_series()
    a = [store.get_run(r.id, series=trials) for r in before]
    b = [store.get_run(r.id, series=trials) for r in after]
    try:
        result = compare_groups(a, b, per_flow=kinds.per_flow)
    except UsageError as exc:      # measured differently, or nothing in common
        return [], [str(exc)]
    by_id = {r.id: r for r in after}
    out = []
    for g in result.groups:
        first = by_id[g.b_ids[0]]
        for m in g.metrics:
            if m.verdict != verdicts.WORSE:
                continue
            out.append(Worse(
                experiment=first.experiment, test=first.test, variant=dict(first.variant),
                metric=m.label, unit=registry.unit(m.metric, m.unit), before=m.a_median,
                after=m.b_median, change_pct=m.change_pct, ci_pct=(m.ci_low_pct, m.ci_high_pct),
                p=m.p_value, runs_before=g.a_ids, runs_after=g.b_ids, source="compare"))
    return out, [*result.unmatched]


Key = tuple[str, str, str, str]         # experiment, test, variant (JSON), metric
# The figures an earlier firing's alert already named, by that firing's experiment id.
Alerted = Callable[[str], set[Key]]


def key(experiment: str, test: str, variant: Mapping[str, Any], metric: str) -> Key:
    return experiment, test, json.dumps(variant, sort_keys=True), metric


def _steps(schedule: str, history: Sequence[RunSummary], this: str, known: set[Key],
           alerted: Alerted) -> list[Worse]:
    """Worse change points of the headline figures over the schedule's history that
    this firing makes visible: it is at or after the step, the step was not found
    without it, and the firing right after the step did not already alert on it."""
    groups: dict[Series, list[RunSummary]] = {}
    for r in history:
        # Every firing one value of the series (by its experiment id, in time order):
        # its runs, whichever bench ran them, so the bench's labels are left out.
        series = dataclasses.replace(series_of(r), by="experiment_id",
                                     labels=(("schedule", schedule),))
        groups.setdefault(series, []).append(r)
    out = []
    for series, runs in groups.items():
        variant = dict(runs[-1].variant)
        for name in _headlines(series.kind):
            pts = points(series, runs, name)
            order = [p.value for p in pts]
            step = latest_step(series, name, pts)
            if step is None or step.verdict != verdicts.WORSE or this not in order or \
                    order.index(this) < order.index(step.after):
                continue
            told = latest_step(series, name, [p for p in pts if p.value != this])
            k = key(series.experiment, series.test, variant, name)
            if (told is not None and told.after == step.after) or k in known or \
                    k in alerted(str(step.after)):
                continue
            out.append(Worse(
                experiment=series.experiment, test=series.test, variant=variant, metric=name,
                unit=registry.unit(name), before=step.median_before, after=step.median_after,
                change_pct=step.change_pct, ci_pct=step.ci_pct, p=step.p,
                runs_before=step.runs_before, runs_after=step.runs_after, source="step"))
    return out


def judge_firing(store: Store, schedule: str, previous: str | None, this: str, *,
                 alerted: Alerted = lambda experiment_id: set()) -> Verdict:
    """The firing of experiment id `this` against the one of `previous` (None: the
    first firing, judged for failures only) and the schedule's history."""
    runs = store.list_runs({"experiment_id": this}, figures=False)
    failed = tuple(Failed(run=r.id, test=r.test, variant=dict(r.variant), status=r.status,
                          error=_error(store, r.id))
                   for r in runs if r.status not in ("ok", "interrupted"))
    ok = [r for r in runs if r.status == "ok"]
    if previous is None or not ok:
        return Verdict(failed=failed)
    before = store.list_runs({"experiment_id": previous, "status": "ok"}, figures=False)
    if not before:
        return Verdict(failed=failed, notes=("the previous firing has no ok run",))
    worse, notes = _compared(store, before, ok)
    known = {key(w.experiment, w.test, w.variant, w.metric) for w in worse}
    history = [r for r in store.runs_with_figures(
        {n for r in ok for n in _headlines(r.kind)}, filters={"schedule": schedule})
        if r.experiment_id is not None]
    worse += _steps(schedule, history, this, known, alerted)
    worse.sort(key=lambda w: (verdicts.rank(verdicts.WORSE, w.change_pct), w.test, w.metric))
    return Verdict(worse=tuple(worse), failed=failed, notes=tuple(notes))


def _headlines(kind: str) -> tuple[str, ...]:
    return tuple(HEADLINES.get(kind, ()))


def _error(store: Store, run_id: int) -> str:
    error = store.get_run(run_id, series=False).error
    return (error or "").strip().splitlines()[0][:300] if error else ""


def pct(value: float) -> str:
    """-49.0 % (the sign always shown)."""
    return "n/a" if not math.isfinite(value) else f"{value:+.1f} %"
