"""A stored run as files other tools read: one JSON document, or two tidy CSV tables.

JSON (`to_json`): the whole run, every series point, raw outputs base64-encoded,
so `from_json` gives back what `Store.get_run(id, raw=True)` gave (and `hoplab
import` can load it into another store). NaN, which strict JSON lacks, is null.

CSV (`write_csv`): series in long form, one row per point
(run,series,node,flow,key,unit,t,value), and metrics in a second table
(run,metric,node,flow,key,unit,value). Empty cells stand for None; floats are
written with repr(), which reads back to the same float.
"""

from __future__ import annotations

import base64
import csv
import math
from typing import IO, Any

from hoplab.errors import UsageError
from hoplab.record import Metric, RawOutput, RunRecord, Series, upgrade_names

FORMAT = "hoplab-run"
FORMAT_VERSION = 1

SERIES_HEADER = ("run", "series", "node", "flow", "key", "unit", "t", "value")
METRICS_HEADER = ("run", "metric", "node", "flow", "key", "unit", "value")

_RUN_FIELDS = ("id", "experiment", "experiment_id", "test", "kind", "repetition", "variant",
               "labels", "started_at", "duration_s", "status", "error", "seed", "order",
               "measurement_version", "metadata")


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _float(v: Any) -> float:
    return math.nan if v is None else float(v)


def to_json(run: RunRecord) -> dict[str, Any]:
    """The run as a JSON-ready dict (json.dumps(..., allow_nan=False) accepts it)."""
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "run": {f: getattr(run, f) for f in _RUN_FIELDS},
        "metrics": [{"name": m.name, "node": m.node, "flow": m.flow, "key": m.key,
                     "unit": m.unit, "value": _num(m.value)} for m in run.metrics],
        "series": [{"name": s.name, "node": s.node, "flow": s.flow, "key": s.key,
                    "unit": s.unit, "t": [_num(t) for t in s.t], "v": [_num(v) for v in s.v]}
                   for s in run.series],
        "raw_outputs": [{"name": r.name, "media_type": r.media_type, "size": len(r.data),
                         "base64": base64.b64encode(r.data).decode("ascii")} for r in run.raw],
    }


def from_json(doc: dict[str, Any]) -> RunRecord:
    """A RunRecord from `to_json`'s output; UsageError for another format or version."""
    if doc.get("format") != FORMAT:
        raise UsageError(f"not a hoplab run export (format {doc.get('format')!r})")
    if doc.get("format_version") != FORMAT_VERSION:
        raise UsageError(f"hoplab run export version {doc.get('format_version')!r}: this "
                         f"hoplab reads version {FORMAT_VERSION}")
    run: dict[str, Any] = doc["run"]
    # An export written by an older hoplab may carry names since split (docs/data-format.md).
    return upgrade_names(RunRecord(
        experiment=run["experiment"], test=run["test"], kind=run["kind"],
        repetition=int(run["repetition"]), variant=run["variant"], labels=run["labels"],
        started_at=float(run["started_at"]), duration_s=float(run["duration_s"]),
        status=run["status"], error=run["error"], seed=run["seed"], order=run["order"],
        experiment_id=run["experiment_id"], measurement_version=run["measurement_version"],
        metadata=run["metadata"], id=run["id"],
        metrics=[Metric(m["name"], _float(m["value"]), m["unit"], flow=m["flow"],
                        node=m["node"], key=m["key"]) for m in doc["metrics"]],
        series=[Series(s["name"], s["unit"], [_float(t) for t in s["t"]],
                       [_float(v) for v in s["v"]], node=s["node"], flow=s["flow"],
                       key=s["key"]) for s in doc["series"]],
        raw=[RawOutput(r["name"], base64.b64decode(r["base64"], validate=True),
                       r["media_type"]) for r in doc["raw_outputs"]]))


def _cell(v: str | None) -> str:
    return "" if v is None else v


def write_series_csv(run: RunRecord, out: IO[str]) -> int:
    """Every series point as one row; returns the number of rows."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(SERIES_HEADER)
    rows = 0
    for s in run.series:
        head = [str(run.id or ""), s.name, _cell(s.node), _cell(s.flow), _cell(s.key), s.unit]
        for t, v in zip(s.t, s.v, strict=True):
            w.writerow([*head, repr(t), repr(v)])
            rows += 1
    return rows


def write_metrics_csv(run: RunRecord, out: IO[str]) -> int:
    """Every metric as one row; returns the number of rows."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(METRICS_HEADER)
    for m in run.metrics:
        w.writerow([str(run.id or ""), m.name, _cell(m.node), _cell(m.flow), _cell(m.key),
                    m.unit, repr(m.value)])
    return len(run.metrics)
