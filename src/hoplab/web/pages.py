"""The dashboard's HTML pages. Charts are drawn by plotly.js served from /static, with
their data from the JSON endpoints or inline; every user-written value is escaped."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hoplab import metrics
from hoplab.analysis import detectors
from hoplab.analysis.changes import WhatChanged
from hoplab.analysis.groups import Comparison
from hoplab.analysis.order import natural_key
from hoplab.analysis.trend import Trend, shown
from hoplab.record import RunRecord
from hoplab.render.charts import Chart
from hoplab.render.comparison import headline, summary
from hoplab.render.html import (
    DRAW_JS,
    Html,
    chart,
    comparison_html,
    esc,
    headline_table,
    metadata_details,
    run_header,
    run_tables,
    table,
)
from hoplab.render.page import page
from hoplab.render.profile_html import profile_section
from hoplab.render.trend_html import (
    change_marks,
    change_points_html,
    note_marks,
    note_places,
    notes_html,
    y_scale,
)
from hoplab.render.units import figure, pairs
from hoplab.store import Annotation, RunSummary
from hoplab.web.home import home_body, latest_html, pending
from hoplab.web.views import CompareView, OverlayView, TrendView, runs_link

if TYPE_CHECKING:
    from hoplab.web.home import Latest

_NAV = ('<nav><a href="/">what changed</a><a href="/runs">runs</a>'
        '<a href="/compare">compare</a><a href="/trend">trend</a>'
        '<a href="/overlay">overlay</a><a href="/fleet">fleet</a><a href="/alerts">alerts</a>'
        '</nav>')
_HEAD = (f'<script src="/static/plotly.min.js"></script><script>{DRAW_JS}</script>')


def dashboard_page(title: str, body: str, store: str, charts: bool = False) -> str:
    """A dashboard page; with `charts`, plotly.js (4.8 MB, seconds of a phone's time to
    parse) and the drawing script, which the pages without charts go without."""
    return page(f"{title} · hoplab", f"{_NAV}<h1>{esc(title)}</h1>{body}"
                f'<p class="note">store: {esc(store)} (read-only)</p>',
                _HEAD if charts else "")


def _link(params: Mapping[str, str]) -> str:
    page = int(params.get("page", "1"))
    return runs_link({k: v for k, v in params.items() if k != "page"}, page)


def view_link(link: str) -> str:
    """The link that opens this view again, as the page is now (web/views.py)."""
    return (f'<p class="note">link to this view: <a id="view-link" href="{esc(link)}">'
            f"{esc(link)}</a></p>")


def _facets(all_runs: Sequence[RunSummary], filters: Mapping[str, str]) -> str:
    """Each column, label and variant key with its values, as links that add (or, when
    already chosen, remove) that filter."""
    values: dict[str, dict[str, None]] = {}
    for r in all_runs:
        row = {"experiment": r.experiment, "test": r.test, "status": r.status,
               **{k: str(v) for k, v in r.labels.items()},
               **{k: json.dumps(v) if isinstance(v, bool) else str(v)
                  for k, v in r.variant.items()}}
        for k, v in row.items():
            values.setdefault(k, {})[v] = None
    rows = []
    for key, vals in values.items():
        if len(vals) < 2 and key not in filters:
            continue
        links = []
        for v in sorted(vals, key=natural_key):
            chosen = filters.get(key) == v
            target = {k: x for k, x in filters.items() if k != key}
            if not chosen:
                target[key] = v
            style = ' style="font-weight:700"' if chosen else ""
            links.append(f'<a href="{esc(_link(target))}"{style}>{esc(v)}</a>')
        rows.append(f"<tr><th>{esc(key)}</th><td>{' · '.join(links)}</td></tr>")
    return f'<table class="kv facets">{"".join(rows)}</table>' if rows else ""


def _count(runs: Sequence[RunSummary], filters: Mapping[str, str], total: int, page: int,
           more: bool, rows: int) -> str:
    """How many runs are shown, with links to the pages before and after this one."""
    if page == 1 and not more:
        return f"{len(runs)} of {total} runs" if filters else f"{len(runs)} runs"
    first = (page - 1) * rows + 1
    text = (f"runs {first}–{first + len(runs) - 1}" + (" of those matching" if filters else "")
            + f" ({total} in the store)")
    for label, target, there in (("previous", page - 1, page > 1), ("next", page + 1, more)):
        if there:
            text += f' · <a href="{esc(_link({**filters, "page": str(target)}))}">{label}</a>'
    return text


def runs_page(runs: Sequence[RunSummary], all_runs: Sequence[RunSummary],
              filters: Mapping[str, str], store: str, *, total: int | None = None,
              page: int = 1, more: bool = False, rows: int = 200) -> str:
    """One page of runs (`page` counts from 1, `more`: pages follow); `all_runs` offer
    the filter links."""
    q = " ".join(f"{k}={v}" for k, v in filters.items())
    form = ('<form method="get" action="/runs"><input type="text" name="q" '
            f'placeholder="hops=2 firmware=v2 test=tcp-up" value="{esc(q)}"> '
            '<button>filter</button> <a href="/runs">clear</a></form>')
    compare = ('<form method="get" action="/compare">compare A <input type="text" name="a" '
               'placeholder="qos=off or 4-6"> with B <input type="text" name="b" '
               'placeholder="qos=on or 7-9"> <button>compare</button></form>')
    shown = _count(runs, filters, len(all_runs) if total is None else total, page, more, rows)
    table = headline_table(runs, "/run/%d") if runs else Html(
        "<p>no runs" + (" match these filters" if filters else " in this store") + "</p>")
    return dashboard_page("Runs", f"{form}{_facets(all_runs, filters)}{compare}"
                 f'<p class="note" id="count">{shown}</p>{table}'
                 f"{view_link(runs_link(filters, page))}", store)


def home_page(found: WhatChanged | None, store: str, state: tuple[int, int],
              notes: Sequence[Annotation] = (), latest: Latest | None = None) -> str:
    """What changed in the store (web/home.py renders analysis/changes.py's answer);
    `state`: the store's now, which `found` may be behind while it is brought up to
    date (None: not found yet); `latest`: the latest experiment's comparison."""
    if found is None or found.state != state:
        body = home_body(found, notes, latest) if found else \
            (latest_html(latest) if latest else "")
        return page("What changed · hoplab", f"{_NAV}<h1>What changed</h1>"
                    f"{pending(found, state)}{body}"
                    f'<p class="note">store: {esc(store)} (read-only)</p>',
                    '<meta http-equiv="refresh" content="3">')
    return dashboard_page("What changed", home_body(found, notes, latest), store)


def run_page(rec: RunRecord, store: str) -> str:
    rid = rec.id
    script = (f"<script>fetch('/api/run/{rid}/charts')" + """.then(r => r.json()).then(d => {
  const box = document.getElementById('charts'); box.textContent = '';
  for (const c of d.charts) {
    const f = document.createElement('figure');
    const div = document.createElement('div'); div.id = c.id; div.className = 'chart';
    const cap = document.createElement('figcaption');
    cap.textContent = c.notes.map(n => 'thinned for drawing: ' + n).join(' · ');
    f.append(div, cap); box.append(f); hoplabDraw(c.id, c.figure);
  }
}).catch(e => {
  document.getElementById('charts').textContent = 'charts failed to load: ' + e;
});</script>""")
    # Figures first: the charts and the run's figures, then what the run was (host, tools,
    # phases), which sent them 1,400 px down.
    failed = (f'<p class="worse">{esc(rec.status)}: {esc(rec.error or "")}</p>'
              if rec.status != "ok" else "")
    body = (f"{failed}"
            f'<p><a href="/compare?a={rid}">compare this run</a> · '
            f'<a href="/api/run/{rid}">JSON</a></p>'
            '<div id="charts"><p class="note">drawing charts…</p></div>'
            f"{script}{run_tables(rec)}<h3>the run</h3>{run_header(rec)}"
            f"{profile_section(rec, f'/run/{rid}/flamegraph.svg')}{metadata_details(rec)}")
    return dashboard_page(f"Run {rid}: {rec.experiment} / {rec.test} ({pairs(rec.variant)}, "
                 f"repetition {rec.repetition})", body, store, charts=True)


def compare_page(view: CompareView, store: str, result: Comparison | None = None,
                 ids: tuple[Sequence[int], Sequence[int]] | None = None,
                 error: str | None = None) -> str:
    a, b = view.a, view.b
    checked = " checked" if view.per_flow else ""
    form = ('<form method="get" action="/compare">A (baseline) <input type="text" name="a" '
            f'value="{esc(a)}" placeholder="qos=off, 4-6"> B <input type="text" name="b" '
            f'value="{esc(b)}" placeholder="qos=on, 7-9"> metrics <input type="text" '
            f'name="metric" value="{esc(",".join(view.metrics))}" placeholder="all, or '
            f'goodput,rtt_median"> <label><input type="checkbox" name="per_flow" value="1"'
            f"{checked}> each flow</label> <button>compare</button></form>")
    parts = [form]
    if error:
        parts.append(f'<p class="worse">{esc(error)}</p>')
    if result is not None and ids is not None:
        def links(xs: Sequence[int]) -> str:
            return ", ".join(f'<a href="/run/{i}">{i}</a>' for i in xs)
        parts.append(f'<p id="headline" class="answer">{esc(headline(result, a, b))}</p>'
                     f"<p>A: runs {links(ids[0])}<br>B: runs {links(ids[1])}</p>"
                     f'<p id="summary">{esc(summary(result))}</p>'
                     + comparison_html(result, link="/run/%d")
                     + f'<p><a id="overlay-link" href="{esc(OverlayView((a, b)).link())}">'
                     "A and B over time, overlaid</a></p>" + view_link(view.link()))
    return dashboard_page("Compare", "".join(parts), store)


def overlay_page(view: OverlayView, store: str, found: Chart | None = None,
                 error: str | None = None) -> str:
    """Several selections' throughput and RTT over time on shared axes (render/overlay.py
    groups and captions them); a form of as many selections as given, and one more."""
    boxes = "".join(f'<input type="text" name="sel" value="{esc(s)}" placeholder="qos=on, '
                    f'4-6"> ' for s in (*view.selections, ""))
    parts = [f'<form method="get" action="/overlay">groups {boxes}<button>overlay</button>'
             "</form>"]
    if error:
        parts.append(f'<p class="worse">{esc(error)}</p>')
    if found is not None:
        parts += [chart(found), view_link(view.link())]
    return dashboard_page("Overlay", "".join(parts), store, charts=found is not None)


def trend_chart(points: Sequence[tuple[str | float, float, int]], metric: str, by: str,
                changes: Sequence[tuple[int, float]] = (), marked: int | None = None,
                places: Sequence[tuple[Any, Annotation]] = ()) -> Chart:
    """A metric's median over a variant value or time; hover tells how many runs each.
    `changes` (the index of the first point after each change point, and its change in
    %, as analysis/trend.py found them) are marked by a dashed line and their change,
    `marked` (one of them) solid; `places`: annotations and where they go (their time
    on a time axis, else trend_html.note_places)."""
    # A variant's values are categories, drawn as the table names them (hops 1, 2, 4:
    # never a tick at 1.5); only time is an axis of its own.
    category = by != "started_at"
    xs: list[Any] = [shown(p[0], by) if category else _iso(float(p[0])) for p in points]
    name, _, where = metric.partition("@")
    label = metrics.label(name) + (f" @ {where}" if where else "")
    div, unit = y_scale(name, [p[1] for p in points])
    trace = {"type": "scatter", "mode": "lines+markers", "name": f"{label} median",
             "x": xs, "y": [p[1] / div for p in points],
             "text": [f"{p[2]} run{'s' if p[2] != 1 else ''}" for p in points],
             "hovertemplate": "%{x}: %{y}<br>%{text}<extra></extra>"}
    layout = {"title": {"text": f"{label} by {by} (median over runs)"}, "height": 420,
              "xaxis": {"title": {"text": by}, **({"type": "category"} if category else {})},
              "yaxis": {"title": {"text": f"{label} ({unit})" if unit else label},
                        "rangemode": "tozero"},
              "margin": {"t": 50, "r": 20, "b": 60, "l": 90}}
    shapes, texts = change_marks(xs, changes, category, marked) if changes else ([], [])
    more_shapes, more_texts = note_marks(places)
    if shapes or more_shapes:
        layout["shapes"], layout["annotations"] = shapes + more_shapes, texts + more_texts
    return Chart("trend", f"{label} by {by}", {"data": [trace], "layout": layout})


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t).isoformat(sep=" ", timespec="seconds")


def _places(points: Sequence[tuple[str | float, float, int]], by: str,
            found: Trend | None, notes: Sequence[Annotation]) -> list[tuple[Any, Annotation]]:
    """Where the annotations go on the trend page's chart."""
    if by == "started_at":
        times = [float(p[0]) for p in points]
        return [(_iso(n.at), n) for n in notes
                if n.at is not None and times and times[0] <= n.at <= times[-1]]
    if found is None:
        return []
    return note_places([shown(p.value, by) for p in found.points],
                       [p.started_at for p in found.points], by, notes)


def _choice(name: str, options: Sequence[tuple[str, str]], chosen: str) -> str:
    opts = "".join(f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>'
                   f"{esc(text)}</option>" for v, text in options)
    return f'<select name="{esc(name)}">{opts}</select>'


def _trend_form(view: TrendView) -> str:
    q = " ".join(f"{k}={v}" for k, v in view.filters.items())
    order = _choice("order", (("natural", "natural order"), ("time", "time order")),
                    view.order)
    detector = _choice("detector", [(n, f"detector {n}") for n in detectors.names()],
                       view.detector or detectors.DEFAULT)
    keep = f'<input type="hidden" name="step" value="{esc(view.step)}">' if view.step else ""
    return ('<form method="get" action="/trend">metric <input type="text" name="metric" '
            f'value="{esc(view.metric)}" placeholder="goodput, rtt_median@flow"> by '
            f'<input type="text" name="by" value="{esc(view.by)}" '
            'placeholder="started_at, hops"> '
            f'runs <input type="text" name="q" value="{esc(q)}" '
            f'placeholder="experiment=quickstart test=tcp-up"> {order} {detector}{keep} '
            "<button>show</button></form>")


def trend_page(view: TrendView, store: str,
               points: Sequence[tuple[str | float, float, int]] | None = None,
               error: str | None = None, found: Trend | None = None,
               notes: Sequence[Annotation] = ()) -> str:
    """`view.step`: the value after the change point to mark (the home links to it);
    `notes`: the store's annotations, drawn where they fall and listed under the chart."""
    metric, by, step = view.metric, view.by, view.step
    parts = [_trend_form(view)]
    if error:
        parts.append(f'<p class="worse">{esc(error)}</p>')
    if points is not None:
        if points:
            marks = [(c.point.index, c.point.change_pct) for c in found.changes] \
                if found is not None else []
            marked = next((c.point.index for c in found.changes
                           if shown(c.after, by) == step), None) if found and step else None
            places = _places(points, by, found, notes)
            parts.append(chart(trend_chart(points, metric, by, marks, marked, places)))
            parts.append(notes_html(places))
            if found is not None:
                parts.append(change_points_html(found, step=step))
            parts.append(str(_points_table(points, metric, by)))
        else:
            parts.append("<p>no run has this metric and key</p>")
        parts.append(view_link(view.link()))
    return dashboard_page("Trend", "".join(parts), store, charts=bool(points))


def _points_table(points: Sequence[tuple[str | float, float, int]], metric: str,
                  by: str) -> Html:
    name = metric.partition("@")[0]
    return table((by, "median", "runs"), [(shown(x, by), figure(m, name), n)
                                          for x, m, n in points],
                 numeric=(1, 2))


def error_page(status: int, message: str, store: str) -> str:
    return dashboard_page(f"{status}", f'<p class="worse">{esc(message)}</p>', store)


