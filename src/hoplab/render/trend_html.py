"""Change points in HTML, for the dashboard's trend page, `hoplab report` and `hoplab
trend -o FILE.html`: a table of the steps analysis/trend.py found, their marks on a
plotly chart, and a chart of a trend with every repetition (trend_chart, the one figure
all three draw). Rendering only: the analysis decides what is a change point."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from hoplab import __version__, metrics
from hoplab.analysis.trend import Trend, TrendChange, cannot_tell, power_note, shown
from hoplab.render.charts import Chart
from hoplab.render.html import Html, chart, esc, table
from hoplab.render.page import page, standalone_scripts
from hoplab.render.units import figure, rate_scale
from hoplab.store import Annotation


def change_marks(xs: Sequence[Any], changes: Sequence[tuple[int, float]], category: bool,
                 marked: int | None = None
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Plotly shapes and annotations: a dashed line halfway between the points on both
    sides of each change (index of the first point after it, change in %), and its
    change at the top. xs are the chart's x values; category: the axis is categorical;
    `marked`: the index of a change drawn solid and thick (the one a link points at)."""
    shapes, notes = [], []
    for index, pct in changes:
        if category:
            at: Any = index - 0.5
        elif isinstance(xs[index], str):        # times, as ISO text
            a, b = (dt.datetime.fromisoformat(xs[i]) for i in (index - 1, index))
            at = (a + (b - a) / 2).isoformat(sep=" ", timespec="seconds")
        else:
            at = (float(xs[index - 1]) + float(xs[index])) / 2
        colour = "#2a7" if pct > 0 else "#c33"
        this = index == marked
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": at, "x1": at,
                       "y0": 0, "y1": 1, "line": {"dash": "solid" if this else "dash",
                                                  "width": 3 if this else 1,
                                                  "color": colour}})
        text = f"{pct:+.1f} %" if math.isfinite(pct) else "?"
        notes.append({"x": at, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom",
                      "text": f"<b>{text}</b>" if this else text,
                      "showarrow": False, "font": {"color": colour, "size": 13 if this else 11}})
    return shapes, notes


NOTE_COLOUR = "#7a5cc0"


def note_places(values: Sequence[str], starts: Sequence[float], by: str,
                notes: Sequence[Annotation]) -> list[tuple[float, Annotation]]:
    """Where each annotation goes on a chart whose x axis is `values` as categories (in
    order, each first measured at `starts`): one on a value of `by` (version=v45) at
    that value; one at a time between the last value measured before it and the first
    after it. Annotations that fall on none are left out."""
    place = {v: i for i, v in enumerate(values)}
    out: list[tuple[float, Annotation]] = []
    for note in notes:
        if note.key is not None:
            if note.key == by and note.value in place:
                out.append((float(place[note.value]), note))
        elif note.at is not None and starts:
            after = next((i for i, t in enumerate(starts) if t >= note.at), None)
            if after is not None and after > 0:
                out.append((after - 0.5, note))
    return out


def note_marks(places: Sequence[tuple[Any, Annotation]]
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Plotly shapes and annotations for note_places (or, on a time axis, each note's
    time): a dotted line and its text at the foot of the chart (hover for all of it)."""
    shapes, texts = [], []
    for x, note in places:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x,
                       "y0": 0, "y1": 1, "line": {"dash": "dot", "width": 1.5,
                                                  "color": NOTE_COLOUR}})
        short = note.text if len(note.text) <= 24 else note.text[:23] + "…"
        texts.append({"x": x, "xref": "x", "y": 0, "yref": "paper", "yanchor": "bottom",
                      "text": short, "hovertext": f"{note.where}: {note.text}",
                      "showarrow": False, "textangle": -90, "xanchor": "right",
                      "font": {"color": NOTE_COLOUR, "size": 10}})
    return shapes, texts


def notes_html(places: Sequence[tuple[Any, Annotation]]) -> Html:
    """The annotations drawn on a chart, listed under it."""
    if not places:
        return Html("")
    items = "".join(f"<li>{esc(n.where)}: {esc(n.text)} "
                    f'<span class="note">(annotation {n.id})</span></li>' for _, n in places)
    return Html(f'<ul class="notes">{items}</ul>')


def change_points_html(found: Trend, step: str | None = None) -> Html:
    """The change points as a table (or a line saying there are none), and what steps
    may go unseen; `step`: the value after the change point a link points at, whose row
    is marked (id "step")."""
    name = found.metric.partition("@")[0]
    if found.changes:
        rows = [(Html(f'<span id="step" class="step">{esc(_between(c, found.by))}</span>')
                 if step is not None and shown(c.after, found.by) == step
                 else _between(c, found.by),
                 figure(c.point.median_before, name), figure(c.point.median_after, name),
                 f"{c.point.change_pct:+.1f} %",
                 f"{c.point.ci_pct[0]:+.1f} … {c.point.ci_pct[1]:+.1f} %",
                 f"{c.point.p:.2g}") for c in found.changes]
        out = str(table((f"change point ({found.by})", "median before", "median after",
                         "change", "95 % CI", "p"), rows, numeric=(1, 2, 3, 4, 5),
                        cls="changes"))
    else:
        # Too few values for any step: say that, not "no change point".
        none = cannot_tell(found) or f"no change point in {found.metric} by {found.by}"
        out = f'<p class="changes">{esc(none)}</p>'
    note = power_note(found)
    if note:
        out += f'<p class="note">{esc(note)}</p>'
    return Html(out)


def _between(c: TrendChange, by: str) -> str:
    return f"{shown(c.before, by)} → {shown(c.after, by)}"


def y_scale(name: str, values: Sequence[float]) -> tuple[float, str]:
    """Divisor and unit of a trend chart's y axis: rates in the unit that reads (25
    Gbit/s, never plotly's "25B"), others in their own."""
    unit = metrics.unit(name)
    if unit != "bit/s":
        return 1.0, unit
    return rate_scale(max((abs(v) for v in values if math.isfinite(v)), default=0.0))


def trend_chart(found: Trend, chart_id: str = "trend",
                notes: Sequence[Annotation] = ()) -> Chart:
    """Every repetition as a point, each value's median as a line, change points marked,
    and the annotations that fall on it (note_places)."""
    name, _, where = found.metric.partition("@")
    label = metrics.label(name) + (f" @ {where}" if where else "")
    div, unit = y_scale(name, [v for p in found.points for v in p.values])
    xs = [shown(p.value, found.by) for p in found.points]
    reps = {"type": "scatter", "mode": "markers", "name": "repetitions",
            "x": [x for x, p in zip(xs, found.points, strict=True) for _ in p.values],
            "y": [v / div for p in found.points for v in p.values],
            "marker": {"size": 5, "opacity": 0.5}}
    medians = {"type": "scatter", "mode": "lines", "name": "median", "x": xs,
               "y": [p.median / div for p in found.points]}
    shapes, texts = change_marks(xs, [(c.point.index, c.point.change_pct)
                                      for c in found.changes], True)
    more_shapes, more_texts = note_marks(note_places(
        xs, [p.started_at for p in found.points], found.by, notes))
    layout = {"title": {"text": f"{label} by {found.by}"}, "height": 420,
              "xaxis": {"title": {"text": found.by}, "type": "category"},
              "yaxis": {"title": {"text": f"{label} ({unit})" if unit else label}},
              "shapes": shapes + more_shapes, "annotations": texts + more_texts,
              "margin": {"t": 50, "r": 20, "b": 60, "l": 90}}
    return Chart(chart_id, f"{label} by {found.by}", {"data": [reps, medians],
                                                      "layout": layout})


def trend_page(found: Trend, source: str) -> str:
    """`hoplab trend -o FILE.html`: one self-contained page (plotly.js inlined, as `hoplab
    report` makes them) with trend_chart, the change points' table and the power note."""
    name = found.metric.partition("@")[0]
    runs = sum(len(p.values) for p in found.points)
    title = f"{found.metric} by {found.by}"
    body = (f"<h1>{esc(title)}</h1>"
            f'<p class="note">{len(found.points)} values, {runs} runs, from {esc(source)}, '
            f"made {esc(dt.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z'))} by "
            f"hoplab {esc(__version__)}; each {esc(metrics.label(name))} repetition a "
            "point, the medians a line, each change point a dashed line with its change."
            "</p>"
            f"{chart(trend_chart(found))}{change_points_html(found)}")
    return page(title, body, standalone_scripts())
