"""The pieces every matplotlib figure shares (render/plots.py dispatches to the kinds):
thinning for drawing, units, how a run and a variant are named, phase lines, legends
and the figure itself. Every plot module imports these; none imports another."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hoplab import kv
from hoplab.record import RunRecord
from hoplab.render import decimate as thin
from hoplab.render.quoted import PhaseLatency, phases
from hoplab.render.units import rate_scale

MAX_POINTS = 2000

Array = npt.NDArray[np.float64]


def decimate(t: Sequence[float] | Array, v: Sequence[float] | Array, max_points: int = MAX_POINTS
             ) -> tuple[Array, Array]:
    """At most about `max_points` points of (t, v) for drawing: per stretch of the series
    its minimum and maximum, in time order, plus the first and the last point (the
    report's thinning, render/decimate.py). A spike one sample wide stays visible,
    which taking every n-th point would lose."""
    ta = np.asarray(t, dtype=np.float64)
    va = np.asarray(v, dtype=np.float64)
    idx = keep(va, max_points)
    return ta[idx], va[idx]


def keep(v: Array, max_points: int = MAX_POINTS) -> npt.NDArray[np.int64]:
    """The indices `decimate` keeps, to apply the same choice to series drawn together.
    A gap (NaN) is kept where it falls, chosen as if it were 0."""
    return thin.min_max_index(np.nan_to_num(np.asarray(v, dtype=np.float64)), max_points)


def unit_scale(values: Sequence[float], unit: str) -> tuple[float, str]:
    """Divisor and unit to draw `values` measured in `unit`."""
    if unit == "bit/s":
        finite = [abs(x) for x in values if math.isfinite(x)]
        return rate_scale(max(finite, default=0.0))
    return 1.0, unit


def variant_label(variant: dict[str, Any]) -> str:
    return kv.pairs(variant, "(no variant)")


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


def draw_phase_latency(ax: Axes, found: Sequence[PhaseLatency]) -> int:
    """The stored idle and loaded RTT as dashed levels over the phases they cover, named
    in the legend (render/quoted.py): the figures show prints, where they belong."""
    for p, colour in zip(found, ("#2ca02c", "#d62728"), strict=False):
        for i, (start, end) in enumerate(p.spans):
            label = f"{p.text} (median, ping and probe)" if i == 0 else "_nolegend_"
            ax.hlines(p.value, start, end, colors=colour, linestyles="--", linewidth=1.6,
                      zorder=5, label=label)
    return len(found)


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
