"""`hoplab plot SELECTION... --overlay`: the groups of render/overlay.py on shared axes,
drawn with matplotlib."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from hoplab.render.overlay import COLORS, Group, panels
from hoplab.render.plot_parts import decimate, new_figure
from hoplab.render.units import rate_scale


def overlay(title: str, groups: Sequence[Group]) -> Figure:
    found = panels(groups)
    fig, axes = new_figure(rows=len(found), height=3.6)
    fig.suptitle(f"{title}: {len(groups)} groups overlaid", fontsize=11)
    for ax, (name, pick) in zip(axes, found, strict=True):
        lines = [(g, color, s) for g, color in zip(groups, COLORS, strict=False)
                 for r in g.runs if (s := pick(r)) is not None]
        div, unit = (rate_scale(max(max(s.v, default=0.0) for _, _, s in lines))
                     if name == "throughput" else (1.0, "ms"))
        named: set[str] = set()
        for g, color, s in lines:
            t, v = decimate(s.t, s.v)
            # One legend entry a group, however many runs it has.
            label = g.caption if g.caption not in named else "_nolegend_"
            named.add(g.caption)
            ax.plot(t, v / div, color=color, linewidth=1.2, alpha=0.8, label=label)
        ax.set_ylabel(f"{'total throughput' if name == 'throughput' else 'RTT'} ({unit})")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    axes[-1].set_xlabel("time since each run started (s)")
    return fig
