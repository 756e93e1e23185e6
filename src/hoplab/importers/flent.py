"""A Flent data file (.flent.gz) as a run.

Flent keeps one JSON object: "metadata" (NAME, TITLE, T0, LENGTH, SERIES_META
with each series' UNITS and RUNNER, ...), "x_values" (seconds since T0) and
"results" (series name -> one value or null per x value); "raw_values" holds
the tools' own samples. The run's clock zero is T0; series are the "results"
points that are not null, on the x values, as Flent draws them.

Mapping: series in Mbits/s -> "throughput" in bit/s (a Flent sum, "... sum"
or "TCP totals", is the total with flow None; with uploads and downloads the
directional sums get key "up" / "down"); "Ping (ms) ..." and other series in
ms -> "rtt" in ms; anything else (averages, fairness) -> "flent" with the
Flent name as key and its units. Flow names are Flent's series names.
"""

from __future__ import annotations

import math
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from hoplab.analysis.stats import mean, median
from hoplab.errors import UsageError
from hoplab.importers.options import Options
from hoplab.jsonsafe import json_safe
from hoplab.kinds.figures import latency_metrics, rate_metrics
from hoplab.record import IMPORTED_MEASUREMENT_VERSIONS, Metric, RawOutput, RunRecord, Series

_RATE_UNITS = {"mbits/s": 1e6, "mbit/s": 1e6, "kbits/s": 1e3, "gbits/s": 1e9, "bits/s": 1.0}
# Flent's computed series that are neither a flow nor a total.
_DERIVED_RUNNERS = {"AverageRunner", "SmoothAverageRunner", "FairnessRunner", "DiffMinRunner"}


def _unix(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _direction(name: str) -> str | None:
    low = name.lower()
    return "up" if "upload" in low else "down" if "download" in low else None


def _points(x: list[float], values: list[Any], scale: float) -> tuple[list[float], list[float]]:
    pts = [(float(t), float(v) * scale) for t, v in zip(x, values, strict=True)
           if v is not None and math.isfinite(float(v))]
    return [p[0] for p in pts], [p[1] for p in pts]


def _classify(name: str, meta: dict[str, Any]) -> tuple[str, float]:
    """("rate" | "total" | "rtt" | "other", scale to hoplab's unit)."""
    units = str(meta.get("UNITS") or "").lower()
    runner = str(meta.get("RUNNER") or "")
    low = name.lower()
    if runner in _DERIVED_RUNNERS or low.endswith((" avg", " fairness")):
        return "other", 1.0
    if units in _RATE_UNITS or (not units and _direction(name)):
        total = runner == "SumRunner" or low.endswith(" sum") or low.endswith("totals")
        return ("total" if total else "rate"), _RATE_UNITS.get(units, 1e6)
    if units == "ms" or low.startswith("ping"):
        return "rtt", 1.0
    return "other", 1.0


def _phases(total: Series, end: float) -> list[dict[str, Any]]:
    # Flent starts its load DELAY seconds in and stops it DELAY before the end; the
    # total's non-null span shows where, which gives the plots their phase lines.
    if not total.t or not 0 < total.t[0] < total.t[-1] < end:
        return []
    lo, hi = total.t[0], total.t[-1]
    return [{"name": "idle", "start_s": 0.0, "end_s": lo},
            {"name": "load", "start_s": lo, "end_s": hi},
            {"name": "idle-after", "start_s": hi, "end_s": end}]


def _summed(flows: list[Series]) -> Series:
    acc: dict[float, float] = {}
    for s in flows:
        for t, v in zip(s.t, s.v, strict=True):
            acc[t] = acc.get(t, 0.0) + v
    times = sorted(acc)
    return Series("throughput", "bit/s", times, [acc[t] for t in times])


def _metrics(series: list[Series], phases: list[dict[str, Any]]) -> list[Metric]:
    out: list[Metric] = []
    for s in series:
        if s.name == "throughput" and s.v:
            # Flent keeps rates, not byte counts: goodput is the mean rate while it ran.
            suffix = "" if s.flow is not None or s.key is None else f"_{s.key}"
            out += [Metric(m.name + suffix, m.value, m.unit, flow=s.flow)
                    for m in rate_metrics(s.v, s.flow)]
            out.append(Metric("goodput" + suffix, mean(s.v), "bit/s", flow=s.flow))
    rtts = [s for s in series if s.name == "rtt" and s.v]
    for s in rtts:
        out += latency_metrics(s.v, s.flow)
    out += latency_metrics([v for s in rtts for v in s.v], None)
    if phases and rtts:
        lo, hi = phases[1]["start_s"], phases[1]["end_s"]
        # Inclusive at both ends: Flent's first and last loaded samples sit on them.
        inside = [v for s in rtts for t, v in zip(s.t, s.v, strict=True) if lo <= t <= hi]
        idle = [v for s in rtts for t, v in zip(s.t, s.v, strict=True) if not lo <= t <= hi]
        if inside and idle:
            out += [Metric("latency_idle", median(idle), "ms"),
                    Metric("latency_load", median(inside), "ms"),
                    Metric("latency_increase", median(inside) - median(idle), "ms")]
    return out


def to_run(doc: dict[str, Any], data: bytes, path: Path, options: Options) -> RunRecord:
    meta: dict[str, Any] = doc.get("metadata") or {}
    x = [float(t) for t in doc["x_values"]]
    results: dict[str, list[Any]] = doc["results"]
    series_meta: dict[str, Any] = meta.get("SERIES_META") or {}
    rates: list[Series] = []
    totals: list[Series] = []
    other: list[Series] = []
    both_ways = {_direction(n) for n in results} >= {"up", "down"}
    for name, values in results.items():
        if not isinstance(values, list) or len(values) != len(x):
            raise UsageError(f"series {name!r} has {len(values)} values for {len(x)} x values")
        info = series_meta.get(name) or {}
        what, scale = _classify(name, info)
        t, v = _points(x, values, scale)
        if what == "rate":
            rates.append(Series("throughput", "bit/s", t, v, flow=name))
        elif what == "total":
            key = _direction(name) if both_ways else None
            totals.append(Series("throughput", "bit/s", t, v, key=key))
        elif what == "rtt":
            other.append(Series("rtt", "ms", t, v, flow=name))
        else:
            other.append(Series("flent", str(info.get("UNITS") or ""), t, v, key=name))
    if rates and not any(s.key is None for s in totals):
        totals.insert(0, _summed(rates))
    series = rates + totals + other
    end = float(meta.get("TOTAL_LENGTH") or (x[-1] if x else 0.0))
    total = next((s for s in totals if s.key is None), None)
    phases = _phases(total, end) if total is not None else []
    name = str(meta.get("NAME") or "flent")
    kind = ("rrul" if name.startswith("rrul") else "tcp" if rates or totals
            else "ping" if other and any(s.name == "rtt" for s in other) else "custom")
    started = _unix(meta.get("T0")) or _unix(meta.get("TIME")) or os.stat(path).st_mtime
    failed = int(meta.get("FAILED_RUNNERS") or 0)
    labels = {"source": "flent"} | ({"title": str(meta["TITLE"])} if meta.get("TITLE") else {})
    gz = data[:2] == b"\x1f\x8b"
    return RunRecord(
        experiment=options.experiment or "imported", test=options.test or name, kind=kind,
        repetition=1, variant={}, labels=labels | options.labels, started_at=started,
        duration_s=end, status="failed" if failed else "ok",
        error=f"Flent: {failed} runner(s) failed" if failed else None,
        measurement_version=IMPORTED_MEASUREMENT_VERSIONS["flent"],
        metadata={"imported_from": {"format": "flent", "file": path.name,
                                    "version": doc.get("version")},
                  "host": meta.get("LOCAL_HOST"), "kernel": meta.get("KERNEL_RELEASE"),
                  "tools": {"flent": meta.get("FLENT_VERSION")},
                  "test": {"name": name, "phases": phases},
                  "flent": json_safe(meta)},
        metrics=_metrics(series, phases), series=series,
        raw=[RawOutput(path.name, data, "application/gzip" if gz else "application/json")])
