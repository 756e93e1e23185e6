"""`hoplab trend -o FILE`: a metric across versions, each value's repetitions as points,
the median as a line, and each change point marked with its change. The analysis
(analysis/trend.py analyse) decides the change points; this only draws them."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from hoplab import metrics
from hoplab.analysis.trend import Trend, shown
from hoplab.analysis.verdicts import NOT_ENOUGH, word
from hoplab.render.plot_parts import new_figure, unit_scale

_MAX_TICKS = 40


def trend_figure(found: Trend) -> Figure:
    name = found.metric.split("@", 1)[0]
    every = [v for p in found.points for v in p.values]
    div, unit = unit_scale(every, metrics.unit(name, ""))
    fig, (ax,) = new_figure(1, 5.0)
    xs = range(len(found.points))
    for x, p in zip(xs, found.points, strict=True):
        ax.plot([x] * len(p.values), [v / div for v in p.values], "o", ms=3, alpha=0.5,
                color="tab:blue", zorder=2)
    ax.plot(list(xs), [p.median / div for p in found.points], "-", color="tab:blue", lw=1.2,
            label="median", zorder=3)
    top = max(every, default=0.0) / div
    for c in found.changes:
        cp = c.point
        at = cp.index - 0.5
        colour = "tab:green" if cp.change_pct > 0 else "tab:red"
        ax.axvline(at, color=colour, ls="--", lw=1, zorder=1)
        text = (f"{cp.change_pct:+.1f} %" if math.isfinite(cp.change_pct) else "?")
        ax.annotate(text, (at, top), xytext=(3, -12), textcoords="offset points",
                    color=colour, fontsize=8, rotation=90, va="top", zorder=4,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
    step = max(1, math.ceil(len(found.points) / _MAX_TICKS))
    ax.set_xticks(list(xs)[::step])
    ax.set_xticklabels([shown(p.value, found.by) for p in found.points][::step], rotation=60,
                       ha="right", fontsize=7)
    ax.set_xlabel(found.by)
    label = metrics.label(name)
    ax.set_ylabel(f"{label} ({unit})" if unit else label)
    # Too few values for any step: the CLI's words, never "0 change points".
    said = (word(NOT_ENOUGH) if found.detection.too_short else
            f"{len(found.changes)} change point{'s' * (len(found.changes) != 1)}")
    ax.set_title(f"{found.metric} by {found.by}: {said}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig
