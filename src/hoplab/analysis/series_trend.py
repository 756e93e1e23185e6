"""A metric over time or over versions: one point per x value, the median of its runs.

    trend(store, "goodput", {"experiment": "wan", "test": "bulk"}, by="version")
    -> [("v1.9", 94.1e6, 3), ("v1.10", 95.0e6, 3)]

x is a run's start time (by="started_at", Unix seconds) or any column, label or
variant key (by="version", by="hops"). Numbers sort as numbers and text sorts
naturally (v1.9 before v1.10); a run without that key, or without a finite value
for the metric, is left out. Only finished runs count unless filters name a status.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from hoplab.analysis.compare import parse_metric
from hoplab.analysis.order import natural_key
from hoplab.errors import UsageError
from hoplab.store import RunSummary, Store

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


def trend(store: Store, metric: str, filters: Mapping[str, str],
          by: str = "started_at", *, limit: int | None = None
          ) -> list[tuple[str | float, float, int]]:
    """Per x value: (x, median of `metric` over its runs, number of runs), sorted by x.

    `metric` is NAME for a whole-run figure, or NAME@FLOW / NAME@node=N,key=K for one
    that each run has to be read in full for. UsageError past `limit` runs."""
    key = parse_metric(metric)
    wanted = dict(filters)
    wanted.setdefault("status", "ok")
    points: dict[str | float, list[float]] = {}
    runs = store.list_runs(wanted, limit=None if limit is None else limit + 1)
    if limit is not None and len(runs) > limit:
        raise UsageError(f"more than {limit} runs match; narrow the filters "
                         "(experiment=..., test=...)")
    for run in runs:
        x = _x(run, by)
        if x is None:
            continue
        if key.flow is None and key.node is None and key.key is None:
            value = run.metrics.get(key.name)
        else:
            value = store.get_run(run.id, series=False).metric(
                key.name, flow=key.flow, node=key.node, key=key.key)
        if value is not None and math.isfinite(value):
            points.setdefault(x, []).append(value)
    return [(x, float(np.median(v)), len(v)) for x, v in sorted(
        points.items(), key=lambda item: natural_key(item[0]))]
