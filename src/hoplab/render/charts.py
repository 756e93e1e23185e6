"""Plotly figures of stored runs, shared by `hoplab report` and `hoplab serve`.

Figures are plain plotly JSON (dicts of data and layout), not plotly.graph_objects:
building graph objects validates every point in Python, which costs more than the
rest of a report; the tests validate the dicts with plotly.graph_objects instead.
Long series are thinned with decimate.min_max and the legend says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hoplab import metrics
from hoplab.analysis.order import natural_key
from hoplab.record import RunRecord, Series
from hoplab.render import decimate, quoted
from hoplab.render.spike_text import spike_marks
from hoplab.render.units import rate_scale

Figure = dict[str, Any]

_CPU_STATES = (("user", "#4c78a8"), ("system", "#f58518"), ("irq", "#e45756"),
               ("softirq", "#72b7b2"))
_LATENCY = ("rtt", "owd_up", "owd_down")
# Page loads (web flows) share the latency panel: one marker per load, at its start.
_PAGE = ("web_load", "web_ttfb")


@dataclass
class Chart:
    id: str                     # usable as an HTML id
    title: str
    figure: Figure
    notes: list[str] = field(default_factory=list)


def rounded(a: np.ndarray[Any, Any], sig: int = 6) -> list[float | None]:
    """`a` as a list rounded to `sig` significant digits of its largest value: charts
    need no more, and "2151.99" is a quarter of the JSON of "2151.989850848333".
    Non-finite values become None (null: a gap), as JSON has no NaN."""
    if a.size == 0:
        return []
    finite = np.isfinite(a)
    top = float(np.max(np.abs(a[finite]))) if finite.any() else 0.0
    digits = 0 if top == 0 else sig - 1 - math.floor(math.log10(top))
    out: list[float | None] = np.round(a, min(max(digits, 0), 12)).tolist()
    if not finite.all():
        out = [None if not ok else x for x, ok in zip(out, finite.tolist(), strict=True)]
    return out


def _trace(s: Series, name: str, budget: int, style: dict[str, Any], scale: float = 1.0
           ) -> tuple[dict[str, Any], str | None]:
    thin = decimate.min_max(s.t, s.v, budget)
    note = None
    if thin.decimated:
        name = f"{name} [{len(thin.t):,} of {thin.total:,} pts]"
        note = (f"{s.name} {s.flow or ''}: {thin.total:,} samples drawn as {len(thin.t):,} "
                "(lowest and highest of each bucket kept)")
    trace = {"type": "scatter", "mode": "lines", "name": name, "x": rounded(thin.t, 7),
             "y": rounded(thin.v / scale), **style}
    return trace, note


def _flow_kinds(rec: RunRecord) -> dict[str, str]:
    flows = rec.metadata.get("test", {}).get("flows", [])
    return {f["name"]: f.get("kind", "") for f in flows if isinstance(f, dict) and "name" in f}


def _phase_marks(rec: RunRecord) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Shapes and labels for the phase boundaries (rrul's idle, load, idle)."""
    ps = quoted.phases(rec)
    if len(ps) < 2:
        return [], []
    shapes, notes = [], []
    for p in ps:
        if p.name != quoted.LOAD:
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": p.start_s,
                           "x1": p.end_s, "y0": 0, "y1": 1, "fillcolor": "#888",
                           "opacity": 0.08, "line": {"width": 0}, "layer": "below"})
        if p.start_s > 0:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": p.start_s,
                           "x1": p.start_s, "y0": 0, "y1": 1,
                           "line": {"dash": "dash", "width": 1, "color": "#555"}})
        notes.append({"xref": "x", "yref": "paper", "x": (p.start_s + p.end_s) / 2,
                      "y": 1.0, "yanchor": "bottom", "showarrow": False,
                      "text": p.name, "font": {"size": 11, "color": "#555"}})
    return shapes, notes


def _named(name: str, figures: str) -> str:
    """A legend entry: the trace's name, then the stored figures it is quoted by."""
    return f"{name}: {figures}" if figures else name


def _tput_traces(rec: RunRecord, tput: Sequence[Series], budget: int, refs: dict[str, str]
                 ) -> tuple[list[dict[str, Any]], list[str], str]:
    div, unit = rate_scale(max((max(s.v) for s in tput), default=0.0))
    data, notes = [], []
    for s in sorted(tput, key=lambda s: (s.flow is None, s.flow or "", s.key or "")):
        if s.flow is None:
            dash = "solid" if s.key is None else ("dot" if s.key == "up" else "dash")
            name = _named("total" + (f" {s.key}" if s.key else ""), quoted.total(rec, s.key))
            line = {"width": 3 if s.key is None else 2, "color": "#222", "dash": dash}
        else:
            name, line = _named(s.flow, quoted.flow_rate(rec, s)), {"width": 1}
        trace, note = _trace(s, name, budget, {"line": line, **refs}, div)
        data.append(trace)
        notes += [note] if note else []
    return data, notes, unit


def _latency_traces(rec: RunRecord, lat: Sequence[Series], budget: int, refs: dict[str, str]
                    ) -> tuple[list[dict[str, Any]], list[str]]:
    kinds = _flow_kinds(rec)
    data, notes = [], []
    for s in lat:
        style: dict[str, Any] = {"line": {"width": 1}}
        if kinds.get(s.flow or "") == "ping" and len(s.t) <= budget:
            style |= {"mode": "lines+markers", "marker": {"size": 4}}
        if s.name != "rtt":
            style["visible"] = "legendonly"     # one-way delays: at hand, not in the way
        label = f"{s.flow} RTT" if s.name == "rtt" else f"{s.flow} {s.name.replace('_', ' ')}"
        label = _named(label, quoted.flow_latency(rec, s))
        if s.name in _PAGE:
            style = {"mode": "markers", "marker": {"size": 7}}
            label = f"{s.flow} {metrics.label(s.name)}"
        trace, note = _trace(s, label, budget, style | refs)
        data.append(trace)
        notes += [note] if note else []
        for name, symbol, what in (("rtt_spike", "triangle-down", "spikes"),
                                   ("rtt_shift", "diamond", "level shifts")):
            events = next((x for x in rec.series if x.name == name and x.flow == s.flow
                           and s.name == "rtt"), None)
            if events is None:
                continue
            t, y = spike_marks(s, events)
            data.append({"type": "scatter", "mode": "markers", "name": f"{s.flow} {what}",
                         "x": rounded(np.asarray(t), 7), "y": rounded(np.asarray(y)),
                         "marker": {"symbol": symbol, "size": 9, "color": "#d62728"},
                         "hovertext": [f"{v:+.3g} ms" for v in events.v], **refs})
    for p, colour in zip(quoted.phase_latency(rec), ("#2ca02c", "#d62728"), strict=False):
        # The stored idle and loaded RTT as levels over their phases (gaps: None).
        xs = np.asarray([x for a, b in p.spans for x in (a, b, np.nan)][:-1])
        data.append({"type": "scatter", "mode": "lines", "x": rounded(xs, 7),
                     "y": rounded(np.where(np.isnan(xs), np.nan, p.value)),
                     "name": f"{p.text} (median, ping and probe)",
                     "line": {"dash": "dash", "width": 2, "color": colour}, **refs})
    return data, notes


def timeline(rec: RunRecord, budget: int = decimate.DEFAULT_POINTS) -> Chart | None:
    """Flent's view: throughput per flow and in total on top, latency below, on one
    time axis, with the phases marked."""
    tput = [s for s in rec.series if s.name == "throughput" and s.t]
    lat = [s for s in rec.series if s.name in (*_LATENCY, *_PAGE) and s.flow and s.t]
    panels = [p for p in (("tput", tput), ("lat", lat)) if p[1]]
    if not panels:
        return None
    data: list[dict[str, Any]] = []
    notes: list[str] = []
    layout: dict[str, Any] = {"height": 200 + 220 * len(panels), "hovermode": "closest",
                              "margin": {"t": 40, "r": 20, "b": 50, "l": 70}}
    legend_below(layout)
    gap = 0.08
    height = (1 - gap * (len(panels) - 1)) / len(panels)
    for i, (kind, group) in enumerate(panels):
        n = "" if i == 0 else str(i + 1)
        top = 1 - i * (height + gap)
        last = i == len(panels) - 1
        layout[f"xaxis{n}"] = {"anchor": f"y{n}", "showticklabels": last,
                               **({"matches": "x"} if i else {}),
                               **({"title": {"text": "time (s)"}} if last else {})}
        refs = {"xaxis": f"x{n}", "yaxis": f"y{n}"}
        if kind == "tput":
            traces, more, unit = _tput_traces(rec, group, budget, refs)
            ytitle = f"throughput ({unit})"
        else:
            traces, more = _latency_traces(rec, group, budget, refs)
            ytitle = "latency (ms)"
        layout[f"yaxis{n}"] = {"domain": [max(0.0, round(top - height, 4)), round(top, 4)],
                               "rangemode": "tozero",
                               "title": {"text": ytitle}}
        data += traces
        notes += more
    layout["shapes"], layout["annotations"] = _phase_marks(rec)
    title = {("tput", "lat"): "Throughput and latency", ("tput",): "Throughput",
             ("lat",): "Latency"}[tuple(k for k, _ in panels)]
    layout["title"] = {"text": title}
    return Chart(_chart_id(rec, "timeline"), title, {"data": data, "layout": layout}, notes)


# Pixels from the plot's bottom edge to below its x axis title ("time (s)").
_BELOW_TITLE_PX = 58


def legend_below(layout: dict[str, Any]) -> dict[str, Any]:
    """A horizontal legend hung below the x axis title, in a bottom margin made for it:
    anchored by its bottom at a fraction of the height (plotly's "auto" for y < 1/3),
    it grew upwards over the title."""
    margin = layout.setdefault("margin", {})
    margin["b"] = max(margin.get("b", 0), _BELOW_TITLE_PX + 60)
    plot = layout["height"] - margin.get("t", 100) - margin["b"]
    layout["legend"] = {"orientation": "h", "yanchor": "top", "x": 0,
                        "y": -round(_BELOW_TITLE_PX / plot, 4)}
    return layout


def cpu(rec: RunRecord, budget: int = decimate.DEFAULT_POINTS) -> Chart | None:
    """Per core, user/system/irq/softirq stacked: where a router spends its cycles."""
    states = {name for name, _ in _CPU_STATES}
    by_core: dict[tuple[str, str], dict[str, Series]] = {}
    for s in rec.series:
        state = s.name.removeprefix("cpu.")
        if s.name.startswith("cpu.") and state in states and s.key and s.t:
            by_core.setdefault((s.node or "", s.key), {})[state] = s
    if any(k != "all" for _, k in by_core):
        by_core = {nk: v for nk, v in by_core.items() if nk[1] != "all"}
    if not by_core:
        return None
    cores = sorted(by_core, key=lambda nk: (natural_key(nk[0]), natural_key(nk[1])))
    cols = 1 if len(cores) <= 2 else 2
    rows = math.ceil(len(cores) / cols)
    data: list[dict[str, Any]] = []
    notes: list[str] = []
    layout: dict[str, Any] = {"height": 120 + 170 * rows, "title": {"text": "CPU per core"},
                              "margin": {"t": 50, "r": 20, "b": 50, "l": 60},
                              "annotations": []}
    legend_below(layout)
    for i, core in enumerate(cores):
        r, c = divmod(i, cols)
        n = "" if i == 0 else str(i + 1)
        x0, x1 = c / cols + (0.04 if c else 0), (c + 1) / cols - (0.04 if c < cols - 1 else 0)
        y1 = 1 - r / rows
        y0 = y1 - 1 / rows + 0.09
        layout[f"xaxis{n}"] = {"domain": [x0, x1], "anchor": f"y{n}",
                               **({"matches": "x"} if i else {})}
        layout[f"yaxis{n}"] = {"domain": [max(0.0, round(y0, 4)), round(y1 - 0.03, 4)],
                               "anchor": f"x{n}", "range": [0, 100],
                               "title": {"text": "%"} if c == 0 else {}}
        layout["annotations"].append({"xref": "paper", "yref": "paper", "x": (x0 + x1) / 2,
                                      "y": y1, "showarrow": False, "yanchor": "bottom",
                                      "text": " ".join(p for p in core if p and p != "host")})
        series = by_core[core]
        t, keep, total = _cpu_points(series, budget)
        if keep is not None and len(keep) < total:
            notes.append(f"{' '.join(core)}: {total:,} samples drawn as {len(keep):,} "
                         "(busiest and idlest of each bucket kept)")
        for state, color in _CPU_STATES:
            if state not in series:
                continue
            v = np.asarray(series[state].v, dtype=np.float64)
            data.append({"type": "scatter", "mode": "lines", "name": state, "x": t,
                         "y": rounded(v if keep is None else v[keep], 4),
                         "stackgroup": f"core{i}", "legendgroup": state, "showlegend": i == 0,
                         "line": {"width": 0.5, "color": color}, "fillcolor": color,
                         "xaxis": f"x{n}", "yaxis": f"y{n}"})
    return Chart(_chart_id(rec, "cpu"), "CPU per core", {"data": data, "layout": layout}, notes)


def _cpu_points(series: dict[str, Series], budget: int
                ) -> tuple[list[float | None], np.ndarray[Any, Any] | None, int]:
    """One set of sample indices for every state of a core, so the stack stays a stack:
    chosen on the busy total, so its peaks and troughs survive thinning."""
    first = next(iter(series.values()))
    n = len(first.t)
    if any(len(s.t) != n for s in series.values()):
        n = min(len(s.t) for s in series.values())
    t = np.asarray(first.t[:n], dtype=np.float64)
    busy = np.sum([np.asarray(s.v[:n], dtype=np.float64) for s in series.values()], axis=0)
    keep = decimate.min_max_index(busy, budget) if n > budget else np.arange(n)
    return rounded(t[keep], 7), keep, n


def latency_cdf(runs: Sequence[RunRecord], max_points: int = decimate.CDF_POINTS
                ) -> Chart | None:
    """The distribution of every RTT sample, one curve per run, or per phase where the
    run stores a figure per phase (rrul's idle and loaded RTT), or per flow
    (quoted.distribution): where a median hides a tail, the CDF shows it."""
    data = []
    notes = []
    for rec in runs:
        for part in quoted.distribution(rec, "rtt"):
            x, y, n = decimate.cdf(part.values, max_points)
            if n == 0:
                continue
            name = " ".join(w for w in (f"run {rec.id}" if len(runs) > 1 else "", part.label)
                            if w) or "rtt"
            if len(x) < n:
                notes.append(f"{name}: {n:,} samples drawn at {len(x):,} evenly spaced ranks")
            figures = [part.median] if part.median else []
            if quoted.phased(rec) and part.label not in ("idle", quoted.LOAD):
                figures.append("all phases")
            data.append({"type": "scatter", "mode": "lines",
                         "name": f"{name}: {', '.join([*figures, f'n={n:,}'])}",
                         "x": rounded(x), "y": rounded(y, 5), "line": {"shape": "hv"}})
    if not data:
        return None
    layout = {"title": {"text": "RTT distribution (CDF)"}, "height": 420,
              "xaxis": {"title": {"text": "RTT (ms)"}, "type": "log"},
              "yaxis": {"title": {"text": "fraction of samples"}, "range": [0, 1.02]},
              "margin": {"t": 50, "r": 20, "b": 50, "l": 70}}
    key = "-".join(str(r.id) for r in runs[:8])
    return Chart(f"cdf-{key}", "RTT distribution", {"data": data, "layout": layout}, notes)


def run_charts(rec: RunRecord, budget: int = decimate.DEFAULT_POINTS) -> list[Chart]:
    charts = [timeline(rec, budget), cpu(rec, budget), latency_cdf([rec])]
    return [c for c in charts if c is not None]


def _chart_id(rec: RunRecord, what: str) -> str:
    return f"{what}-{rec.id if rec.id is not None else 'x'}"


def figure_json(fig: Figure) -> str:
    """JSON safe to put inside <script>: no "</script>" or "<!--" can end it early."""
    text = json.dumps(fig, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
