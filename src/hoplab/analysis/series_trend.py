"""A metric over time or over versions: one point per x value, the median of its runs.

    trend(store, "goodput", {"experiment": "wan", "test": "bulk"}, by="version")
    -> [("v1.9", 94.1e6, 3), ("v1.10", 95.0e6, 3)]

x is a run's start time (by="started_at", Unix seconds) or any column, label or
variant key (by="version", by="hops"). Numbers sort as numbers and text sorts
naturally (v1.9 before v1.10); a run without that key, or without a finite value
for the metric, is left out. Only finished runs count unless filters name a status.

trend_points keeps every run of every value (what change points are found on); trend
gives the medians. Both read the store in _read, the one place that query lives.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hoplab.analysis.compare import parse_metric
from hoplab.analysis.order import natural_key
from hoplab.errors import UsageError
from hoplab.store import RunSummary, Store

Variant = tuple[tuple[str, str], ...]
_NONE = "(none)"                    # a run without a key the others have
_COLUMNS = ("experiment", "experiment_id", "test", "kind", "status", "repetition",
            "started_at", "duration_s", "id")


def _x(run: RunSummary, by: str) -> str | float | None:
    value: Any
    if by in _COLUMNS:
        value = getattr(run, by)
    elif by in run.labels:
        value = run.labels[by]
    else:
        value = run.variant.get(by)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return float(value)
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class TrendPoint:
    value: str | float              # the x value: a version, a commit, a hop count
    runs: tuple[int, ...]           # run ids, in id order
    values: tuple[float, ...]       # the metric of each run (its repetitions)
    started_at: float               # the first of its runs' start times
    tests: frozenset[str]           # experiment/test of its runs

    @property
    def median(self) -> float:
        return float(np.median(self.values))


def _read(store: Store, metric: str, filters: Mapping[str, str], by: str,
          limit: int | None) -> list[tuple[str | float, int, float, float, str, Variant]]:
    """(x, run id, value, started_at, experiment/test, its variant but `by`) of every
    matching run that has the metric."""
    key = parse_metric(metric)
    wanted = dict(filters)
    wanted.setdefault("status", "ok")
    # One query for the runs and their values, however many (store.metric_values).
    found = store.metric_values(key.name, wanted, flow=key.flow, node=key.node, key=key.key,
                                limit=None if limit is None else limit + 1)
    if limit is not None and len(found) > limit:
        raise UsageError(f"more than {limit} runs match; narrow the filters "
                         "(experiment=..., test=...)")
    out = []
    for run, value in found:
        x = _x(run, by)
        if x is not None and math.isfinite(value):
            variant = tuple(sorted((k, v if isinstance(v, str) else json.dumps(v))
                                   for k, v in run.variant.items() if k != by))
            out.append((x, run.id, value, run.started_at, f"{run.experiment}/{run.test}",
                        variant))
    return out


def trend_points(store: Store, metric: str, filters: Mapping[str, str],
                 by: str = "version", *, order: str = "natural",
                 sequence: Sequence[str] | None = None, limit: int | None = None
                 ) -> list[TrendPoint]:
    """Every run of `metric` grouped by x value, the values in `order`: "natural"
    (v1.9 before v1.10), "time" (by each value's first run), or "sequence": the order
    of `sequence` (a value is found by its text; git:REPO gives commits oldest first).
    UsageError for a value `sequence` does not hold, or past `limit` runs."""
    return _points(_read(store, metric, filters, by, limit), order, sequence, by)


def _points(rows: Sequence[tuple[str | float, int, float, float, str, Variant]], order: str,
            sequence: Sequence[str] | None, by: str) -> list[TrendPoint]:
    grouped: dict[str | float, list[tuple[int, float, float, str]]] = {}
    for x, run_id, value, started, test, _ in rows:
        grouped.setdefault(x, []).append((run_id, value, started, test))
    points = [TrendPoint(value=x, runs=tuple(r[0] for r in rows),
                         values=tuple(r[1] for r in rows),
                         started_at=min(r[2] for r in rows),
                         tests=frozenset(r[3] for r in rows))
              for x, rows in grouped.items()]
    return order_points(points, order, sequence, by)


@dataclass(frozen=True)
class TrendSeries:
    variant: dict[str, str]         # what its runs share of the keys that split them
    points: list[TrendPoint]

    @property
    def label(self) -> str:
        """"gro=on hops=2", or "" for the only series."""
        return " ".join(f"{k}={v}" for k, v in self.variant.items())


def trend_series(store: Store, metric: str, filters: Mapping[str, str],
                 by: str = "version", *, order: str = "natural",
                 sequence: Sequence[str] | None = None, limit: int | None = None
                 ) -> list[TrendSeries]:
    """trend_points, one series for each combination of the variant keys other than `by`
    that take several values among the runs (in natural order): runs of gro=on and of
    gro=off are two measurements, and pooling them would follow gro as much as the
    versions. As compare pairs runs, like with like."""
    rows = _read(store, metric, filters, by, limit)
    keys = sorted({k for *_, variant in rows for k, _ in variant})
    seen = {k: {dict(r[5]).get(k, _NONE) for r in rows} for k in keys}
    split = [k for k in keys if len(seen[k]) > 1]
    groups: dict[tuple[str, ...], list[tuple[str | float, int, float, float, str, Variant]]] = {}
    for r in rows:
        groups.setdefault(tuple(dict(r[5]).get(k, _NONE) for k in split), []).append(r)
    return [TrendSeries(variant=dict(zip(split, key, strict=True)),
                        points=_points(members, order, sequence, by))
            for key, members in sorted(groups.items(),
                                       key=lambda kv: [natural_key(v) for v in kv[0]])]


def order_points(points: Sequence[TrendPoint], order: str,
                 sequence: Sequence[str] | None = None, by: str = "version"
                 ) -> list[TrendPoint]:
    """`points` in `order` (see trend_points)."""
    key: Callable[[TrendPoint], Any]
    if order == "natural":
        key = lambda p: natural_key(p.value)  # noqa: E731
    elif order == "time":
        key = lambda p: (p.started_at, natural_key(p.value))  # noqa: E731
    elif order == "sequence":
        place = {text: i for i, text in enumerate(sequence or ())}
        missing = [p.value for p in points if _text(p.value) not in place]
        if missing:
            shown = ", ".join(map(str, sorted(missing, key=natural_key)[:10]))
            raise UsageError(f"{len(missing)} value(s) of {by} are not in the order given: "
                             f"{shown}")
        key = lambda p: place[_text(p.value)]  # noqa: E731
    else:
        raise UsageError(f"order {order!r}: use natural, time or git:REPO")
    return sorted(points, key=key)


def _text(value: str | float) -> str:
    return value if isinstance(value, str) else f"{value:g}"


def trend(store: Store, metric: str, filters: Mapping[str, str],
          by: str = "started_at", *, limit: int | None = None
          ) -> list[tuple[str | float, float, int]]:
    """Per x value: (x, median of `metric` over its runs, number of runs), sorted by x.

    `metric` is NAME for a whole-run figure, or NAME@FLOW / NAME@node=N,key=K for one
    that each run has to be read in full for. UsageError past `limit` runs."""
    return [(p.value, p.median, len(p.values))
            for p in trend_points(store, metric, filters, by, limit=limit)]
