"""The dashboard's overlay: the groups of render/overlay.py on shared axes, as one plotly
figure (throughput above, latency below), one colour and one legend entry a group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hoplab.render import decimate
from hoplab.render.charts import Chart, legend_below, rounded
from hoplab.render.overlay import COLORS, Group, panels
from hoplab.render.units import rate_scale


def overlay_chart(title: str, groups: Sequence[Group],
                  budget: int = decimate.DEFAULT_POINTS) -> Chart:
    found = panels(groups)
    data: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"title": {"text": f"{title}: {len(groups)} groups overlaid"},
                              "height": 200 + 220 * len(found), "hovermode": "closest",
                              "margin": {"t": 50, "r": 20, "b": 50, "l": 70}}
    legend_below(layout)
    gap = 0.08
    height = (1 - gap * (len(found) - 1)) / len(found)
    for i, (name, pick) in enumerate(found):
        n = "" if i == 0 else str(i + 1)
        top = 1 - i * (height + gap)
        lines = [(g, color, s) for g, color in zip(groups, COLORS, strict=False)
                 for r in g.runs if (s := pick(r)) is not None]
        div, unit = (rate_scale(max(max(s.v, default=0.0) for _, _, s in lines))
                     if name == "throughput" else (1.0, "ms"))
        named: set[str] = set()
        for g, color, s in lines:
            thin = decimate.min_max(s.t, s.v, budget)
            data.append({"type": "scatter", "mode": "lines", "name": g.caption,
                         "legendgroup": g.caption, "showlegend": g.caption not in named,
                         "x": rounded(thin.t, 7), "y": rounded(thin.v / div),
                         "line": {"color": color, "width": 1.5}, "opacity": 0.85,
                         "xaxis": f"x{n}", "yaxis": f"y{n}"})
            named.add(g.caption)
        last = i == len(found) - 1
        layout[f"xaxis{n}"] = {"anchor": f"y{n}", "showticklabels": last,
                               **({"matches": "x"} if i else {}),
                               **({"title": {"text": "time since each run started (s)"}}
                                  if last else {})}
        what = "total throughput" if name == "throughput" else "RTT"
        layout[f"yaxis{n}"] = {"domain": [max(0.0, round(top - height, 4)), round(top, 4)],
                               "rangemode": "tozero", "title": {"text": f"{what} ({unit})"}}
    return Chart("overlay", f"{title}: overlay", {"data": data, "layout": layout})
