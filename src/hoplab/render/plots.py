"""Figures of stored runs, drawn with matplotlib off screen (no display needed).

    fig = figure("timeseries", [run])          # a matplotlib Figure
    save(fig, Path("run7.png"))                # .png, .svg or .pdf

Kinds: timeseries (throughput per flow and in total, latency below, phase
lines, as Flent draws it), cdf (latency, several runs on one axis, each phase
its own curve), box (a metric across repetitions, per variant), bars (median per
variant with min-max error bars), ping (ping streams over time, lines or
points), cpu (per-core CPU stacked by user, system, irq and softirq), timeline
(one flow through several runs end to end), throughput (RFC 2544's no-drop rate
by frame size, with the generator's ceiling), tcpinfo (each TCP flow's cwnd, smoothed
RTT and delivery rate over time, from the tcp_info sampler). Figures are plain
matplotlib.figure.Figure objects, never registered with pyplot, so nothing has
to be closed. Lines of more than MAX_POINTS points are thinned for drawing (the
minimum and maximum of each stretch are kept); every figure a legend quotes is
a stored metric of the run (render/quoted.py), never one recomputed from the
drawn points.

This module only dispatches: the kinds are drawn in plots_time, plots_dist and
plots_timeline, on the shared pieces of plot_parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from hoplab.errors import UsageError
from hoplab.record import RunRecord
from hoplab.render import plots_dist, plots_throughput, plots_time, plots_timeline
from hoplab.render.plot_kinds import FORMATS, KINDS, SINGLE_RUN


def figure(kind: str, runs: Sequence[RunRecord], *, metric: str | None = None,
           style: str = "lines", flow: str | None = None) -> Figure:
    """The figure of `kind` for `runs`; UsageError when they have nothing to draw."""
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
    if kind == "tcpinfo":
        return plots_time.tcpinfo(runs[0])
    if kind == "timeline":
        return plots_timeline.timeline(runs, flow)
    if kind == "throughput":
        return plots_throughput.throughput(runs)
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
