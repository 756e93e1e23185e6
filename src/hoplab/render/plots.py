"""Figures of stored runs, drawn with matplotlib off screen (no display needed).

    fig = figure("timeseries", [run])          # a matplotlib Figure
    save(fig, Path("run7.png"))                # .png, .svg or .pdf

Kinds: timeseries (throughput per flow and in total, latency below, phase
lines, as Flent draws it), cdf (latency, several runs on one axis), box (a
metric across repetitions, per variant), bars (median per variant with min-max
error bars), ping (ping streams over time, lines or points), cpu (per-core CPU
stacked by user, system, irq and softirq). Figures are plain
matplotlib.figure.Figure objects, never registered with pyplot, so nothing
has to be closed. Lines of more than MAX_POINTS points are decimated for
drawing (the minimum and maximum of each stretch are kept); every figure
printed in a title or a legend is computed from all points.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hoplab.errors import UsageError
from hoplab.record import RunRecord
from hoplab.render.plot_kinds import FORMATS, KINDS, SINGLE_RUN
from hoplab.render.units import rate_scale

MAX_POINTS = 2000

Array = npt.NDArray[np.float64]


def decimate(t: Sequence[float] | Array, v: Sequence[float] | Array, max_points: int = MAX_POINTS
             ) -> tuple[Array, Array]:
    """At most about `max_points` points of (t, v) for drawing: per stretch of the series
    its minimum and maximum, in time order, plus the first and the last point. A spike
    one sample wide stays visible, which taking every n-th point would lose."""
    ta = np.asarray(t, dtype=np.float64)
    va = np.asarray(v, dtype=np.float64)
    idx = keep(va, max_points)
    return ta[idx], va[idx]


def keep(v: Array, max_points: int = MAX_POINTS) -> npt.NDArray[np.intp]:
    """The indices `decimate` keeps, to apply the same choice to series drawn together."""
    n = len(v)
    if n <= max_points:
        return np.arange(n)
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(np.intp)
    chosen = {0, n - 1}
    filled = np.where(np.isnan(v), 0.0, v)
    for a, b in itertools.pairwise(edges.tolist()):
        if b > a:
            chosen.add(int(a + np.argmin(filled[a:b])))
            chosen.add(int(a + np.argmax(filled[a:b])))
    return np.array(sorted(chosen), dtype=np.intp)


def unit_scale(values: Sequence[float], unit: str) -> tuple[float, str]:
    """Divisor and unit to draw `values` measured in `unit`."""
    if unit == "bit/s":
        finite = [abs(x) for x in values if math.isfinite(x)]
        return rate_scale(max(finite, default=0.0))
    return 1.0, unit


def variant_label(variant: dict[str, Any]) -> str:
    return " ".join(f"{k}={_text(v)}" for k, v in variant.items()) or "(no variant)"


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def run_label(run: RunRecord) -> str:
    """How a legend names a run: '#7 tcp-up hops=2 rep 1'."""
    parts = [f"#{run.id}" if run.id is not None else "", run.test]
    if run.variant:
        parts.append(variant_label(run.variant))
    parts.append(f"rep {run.repetition}")
    return " ".join(p for p in parts if p)


def run_title(run: RunRecord) -> str:
    status = "" if run.status == "ok" else f" [{run.status}]"
    return f"{run.experiment} / {run_label(run)} ({run.kind}){status}"


def phases(run: RunRecord) -> list[tuple[str, float, float]]:
    test = run.metadata.get("test") if isinstance(run.metadata, dict) else None
    raw = test.get("phases") if isinstance(test, dict) else None
    out = []
    for p in raw or []:
        try:
            out.append((str(p["name"]), float(p["start_s"]), float(p["end_s"])))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def draw_phases(axes: Sequence[Axes], run: RunRecord) -> None:
    """Dashed lines where one phase ends and the next begins, names over the top axis.
    A single phase (the whole run) has no boundary worth a line."""
    ph = phases(run)
    if len(ph) < 2:
        return
    for _, start, _ in ph[1:]:
        for ax in axes:
            ax.axvline(start, color="0.4", linestyle="--", linewidth=1, label="_phase")
    top = axes[0]
    for name, start, end in ph:
        top.text((start + end) / 2, 1.01, name, transform=top.get_xaxis_transform(),
                 ha="center", va="bottom", fontsize=8, color="0.3")


def legend(ax: Axes, entries: int) -> None:
    if entries == 0:
        return
    if entries > 8:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  ncol=1 + entries // 24)
    else:
        ax.legend(fontsize=8, loc="best")


def new_figure(rows: int = 1, height: float = 4.5) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(11, max(3.0, height * rows ** 0.8)), layout="constrained")
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)
    return fig, [ax for row in axes for ax in row]


def figure(kind: str, runs: Sequence[RunRecord], *, metric: str | None = None,
           style: str = "lines", flow: str | None = None) -> Figure:
    """The figure of `kind` for `runs`; UsageError when they have nothing to draw."""
    from hoplab.render import plots_dist, plots_time

    if kind not in KINDS:
        raise UsageError(f"no plot kind {kind!r}; one of {', '.join(KINDS)}")
    if not runs:
        raise UsageError("no runs to plot")
    if kind in SINGLE_RUN and len(runs) != 1:
        raise UsageError(f"--kind {kind} draws one run; {len(runs)} were given")
    if kind == "timeseries":
        return plots_time.timeseries(runs[0])
    if kind == "ping":
        return plots_time.ping(runs[0], style=style)
    if kind == "cpu":
        return plots_time.cpu(runs[0])
    if kind == "timeline":
        from hoplab.render.plots_timeline import timeline

        return timeline(runs, flow)
    if kind == "cdf":
        return plots_dist.cdf(runs, series=metric or "rtt")
    if kind == "box":
        return plots_dist.box(runs, metric)
    return plots_dist.bars(runs, metric)


def save(fig: Figure, path: Path) -> Path:
    """Write `fig` as PNG, SVG or PDF, after the file's suffix."""
    if path.suffix.lower() not in FORMATS:
        raise UsageError(f"{path}: the file must end in {', '.join(FORMATS)}")
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
