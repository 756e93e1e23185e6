"""HTML pieces shared by the report and the dashboard. Every value that comes from a
run (labels, names, errors: anything a user or a tool wrote) goes through esc()."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable, Sequence

from hoplab import metrics
from hoplab.analysis.compare import MetricComparison
from hoplab.analysis.groups import Comparison
from hoplab.record import Metric, RunRecord
from hoplab.render import comparison as view
from hoplab.render.charts import Chart, figure_json
from hoplab.render.headline import HEADLINE
from hoplab.render.run_view import CPU_COLUMNS, FLOW_COLUMNS, IFACE_COLUMNS, QDISC_COLUMNS
from hoplab.render.spike_text import spike_lines
from hoplab.render.units import figure, notes, pairs
from hoplab.store import RunSummary

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px;
color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:2em;border-bottom:1px solid #ddd}
h3{font-size:15px}
table{border-collapse:collapse;margin:.5em 0 1em;display:block;max-width:100%;
overflow-x:auto}
th,td{padding:3px 9px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv th{font-weight:600;padding-right:18px}
.better{color:#1a7f37;font-weight:600}.worse{color:#c62828;font-weight:600}
.same{color:#555}.na{color:#999}.failed,.interrupted{color:#c62828}
figcaption,.note{color:#666;font-size:12px}
nav{display:flex;flex-wrap:wrap;row-gap:4px}nav a{margin-right:14px}
pre{background:#f6f6f6;padding:8px;overflow:auto;max-height:480px}
details{margin:.5em 0}.chart{min-height:200px}
form input[type=text]{width:22em;max-width:100%}
.wide{overflow-x:auto;max-width:100%}.answer{font-size:16px;font-weight:600}
.step{background:#fff3c4;font-weight:600}.annotation{color:#7a5cc0;font-size:12px}
@media (max-width:700px){table.cards thead{display:none}table.cards tr{display:block;
border-bottom:1px solid #ddd;padding:4px 0}table.cards td{display:inline-block;border:0;
padding:1px 6px 1px 0;text-align:left}}code.cmd{display:block;white-space:pre-wrap;
overflow-wrap:anywhere;background:#f6f6f6;padding:4px;font-size:12px}
"""

# Charts are drawn as they come near the screen (IntersectionObserver), not all at load:
# a report of eighteen runs holds some sixty, and drawing them all took seconds before
# anything could be read. A page that loads plotly.js itself asynchronously (the report,
# page.standalone_scripts) sets window.hoplabReady; the dashboard loads it before this.
DRAW_JS = """
const hoplabWait = new Map();
const hoplabView = 'IntersectionObserver' in window ? new IntersectionObserver(seen => {
  for (const e of seen) {
    if (e.isIntersecting) { hoplabView.unobserve(e.target); hoplabPlot(e.target.id); }
  }
}, {rootMargin: '300px 0px'}) : null;
function hoplabPlot(id) {
  const fig = hoplabWait.get(id);
  if (fig === undefined) return;
  hoplabWait.delete(id);
  (window.hoplabReady || Promise.resolve()).then(() => Plotly.newPlot(
    id, fig.data, fig.layout, {responsive: true, displaylogo: false, showLink: false}));
}
function hoplabDraw(id, fig) {
  hoplabWait.set(id, fig);
  const el = document.getElementById(id);
  if (hoplabView && el) hoplabView.observe(el); else hoplabPlot(id);
}
"""


class Html(str):
    """Text that is already HTML: table() and cell() pass it through unescaped."""

    __slots__ = ()


def esc(x: object) -> str:
    return x if isinstance(x, Html) else html.escape(str(x), quote=True)


def when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def table(head: Sequence[str], rows: Iterable[Sequence[object]], numeric: Sequence[int] = (),
          cls: str = "") -> Html:
    num = set(numeric)
    out = [f'<table class="{esc(cls)}"><thead><tr>']
    out += [f'<th class="{"n" if i in num else ""}">{esc(h)}</th>' for i, h in enumerate(head)]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f'<td class="{"n" if i in num else ""}">{esc(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return Html("".join(out))


def kv(rows: Iterable[tuple[str, object]]) -> Html:
    return Html('<table class="kv">' + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>"
                                                for k, v in rows) + "</table>")


def chart(c: Chart) -> Html:
    """A div for the figure and the script that draws it (plotly.js must be loaded)."""
    notes = "".join(f"<div>thinned for drawing: {esc(n)}</div>" for n in c.notes)
    # The chart's own height before it is drawn: the page does not jump as charts are
    # drawn on scrolling, and what is in view is known before any is drawn.
    height = c.figure.get("layout", {}).get("height")
    style = f' style="height:{int(height)}px"' if isinstance(height, int | float) else ""
    return Html(f'<figure><div class="chart" id="{esc(c.id)}"{style}></div>'
                f"<figcaption>{notes}</figcaption></figure>"
                f'<script>hoplabDraw("{esc(c.id)}", {figure_json(c.figure)});</script>')


def run_header(rec: RunRecord) -> Html:
    md = rec.metadata
    tools = md.get("tools", {})
    rows: list[tuple[str, object]] = [
        ("experiment", f"{rec.experiment} (id {rec.experiment_id}, seed {rec.seed}, "
                       f"order {rec.order})"),
        ("test", f"{rec.test} ({rec.kind}), repetition {rec.repetition}"),
        ("variant", pairs(rec.variant)), ("labels", pairs(rec.labels)),
        ("status", rec.status + (f": {rec.error}" if rec.error else "")),
        ("started", f"{when(rec.started_at)}, {rec.duration_s:.1f} s"),
        ("host", f"{md.get('host', '?')}, kernel {md.get('kernel', '?')}, "
                 f"{md.get('cpus', '?')} x {md.get('cpu_model', '?')}"),
        ("tools", ", ".join(f"{k} {v}" for k, v in sorted(tools.items()) if v)
         if isinstance(tools, dict) else "-"),
        ("versions", f"hoplab {md.get('hoplab_version', '?')}, measurement "
                     f"v{rec.measurement_version}"),
    ]
    phases = md.get("test", {}).get("phases", [])
    if phases:
        rows.append(("phases", ", ".join(f"{p.get('name')} {p.get('start_s', 0):g}-"
                                         f"{p.get('end_s', 0):g} s" for p in phases)))
    if "grade" in md:
        rows.append(("bufferbloat grade", md["grade"]))
    return kv(rows)


def _flows_table(rec: RunRecord) -> Html | None:
    flows = [f for f in rec.metadata.get("test", {}).get("flows", []) if isinstance(f, dict)]
    if not flows:
        return None
    return table(("flow", "kind", "from", "to", "direction", "start", "duration"),
                 [(f.get("name"), f.get("kind"), f.get("src"), f.get("dst"),
                   f.get("direction") or "-", f"{f.get('start_s') or 0:g} s",
                   f"{f.get('duration_s') or 0:g} s") for f in flows], numeric=(5, 6))


def _matrix(rows: dict[str, dict[str, Metric]], first: str,
            columns: Sequence[str]) -> Html | None:
    present = [(n, metrics.label(n)) for n in columns if any(n in r for r in rows.values())]
    if not rows or not present:
        return None
    return table((first, *(label for _, label in present)),
                 [(name, *(figure(cols[n].value, n, cols[n].unit) if n in cols else "-"
                           for n, _ in present)) for name, cols in rows.items()],
                 numeric=range(1, len(present) + 1))


def _by(metrics: Sequence[Metric], prefix: str) -> dict[str, dict[str, Metric]]:
    rows: dict[str, dict[str, Metric]] = {}
    for m in metrics:
        if m.name.startswith(prefix) and m.node:
            rows.setdefault(f"{m.node} {m.key}" if m.key else m.node, {})[m.name] = m
    return rows


def run_tables(rec: RunRecord) -> Html:
    """The run's exact figures (never thinned), as `hoplab show` prints them."""
    whole = [m for m in rec.metrics if m.flow is None and m.node is None and m.key is None]
    flows: dict[str, dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.flow is not None and m.node is None:
            flows.setdefault(m.flow, {})[m.name] = m
    parts = [
        ("figures", table(("metric", "value"), [(metrics.label(m.name),
                                                 figure(m.value, m.name, m.unit))
                                                for m in whole], numeric=(1,))
         if whole else None),
        ("flows", _flows_table(rec)),
        ("per flow", _matrix(flows, "flow", FLOW_COLUMNS)),
        ("latency spikes", Html("<ul>" + "".join(f"<li>{esc(line)}</li>"
                                                 for line in spike_lines(rec)) + "</ul>")
         if spike_lines(rec) else None),
        ("CPU in the load phase (host-wide)", _matrix(_by(rec.metrics, "cpu."), "core",
                                                      CPU_COLUMNS)),
        ("interfaces in the load phase", _matrix(_by(rec.metrics, "iface."), "interface",
                                                 IFACE_COLUMNS)),
        ("qdiscs in the load phase", _matrix(_by(rec.metrics, "qdisc."), "qdisc",
                                             QDISC_COLUMNS)),
    ]
    said = "".join(f'<p class="note">note: {esc(n)}</p>'
                   for n in notes(m.name for m in rec.metrics))
    return Html("".join(f"<h3>{esc(title)}</h3>{body}" for title, body in parts if body)
                + said)


def metadata_details(rec: RunRecord) -> Html:
    text = json.dumps(rec.metadata, indent=2, sort_keys=True, default=str)
    return Html(f"<details><summary>all metadata (JSON)</summary><pre>{esc(text)}</pre>"
                "</details>")


def headline_table(runs: Sequence[RunSummary], link: str | None = None) -> Html:
    """One row per run with its kind's headline figures; `link` % id makes ids links."""
    names = list(dict.fromkeys(n for r in runs for n in HEADLINE.get(r.kind, ())))
    names = [n for n in names if any(n in r.metrics for r in runs)]
    rows = []
    for r in runs:
        rid: object = Html(f'<a href="{esc(link % r.id)}">{r.id}</a>') if link else r.id
        status = Html(f'<span class="{esc(r.status)}">{esc(r.status)}</span>')
        rows.append((rid, when(r.started_at), r.experiment, r.test, pairs(r.variant),
                     pairs(r.labels), r.repetition, status,
                     *(figure(r.metrics[n], n) if n in r.metrics else "-"
                       for n in names)))
    head = ("id", "started", "experiment", "test", "variant", "labels", "rep", "status",
            *(metrics.label(n) for n in names))
    said = "".join(f'<p class="note">note: {esc(n)}</p>' for n in notes(names))
    return Html(table(head, rows, numeric=(0, 6, *range(8, 8 + len(names)))) + said)


def comparison_table(comps: Sequence[MetricComparison], alpha: float = 0.05) -> Html:
    rows = []
    for c in comps:
        cls = {"better": "better", "worse": "worse", "same": "same"}.get(c.verdict, "na")
        rows.append((view.row_name(c), figure(c.a_median, c.metric, c.unit), view.size(c, "a"),
                     figure(c.b_median, c.metric, c.unit), view.size(c, "b"),
                     view.pct(c.change_pct), view.ci(c),
                     "-" if c.p_value is None else f"{c.p_value:.3g}",
                     Html(f'<span class="verdict {cls}">{esc(view.verdict(c))}</span>')))
    return table(("metric", "A median", "A runs", "B median", "B runs", "change",
                  f"{100 * (1 - alpha):g} % CI",
                  "p", "verdict (B vs A)"), rows, numeric=(1, 2, 3, 4, 5, 6, 7), cls="compare")


def comparison_html(result: Comparison, alpha: float = 0.05, link: str | None = None) -> Html:
    """Every group of a comparison (analysis.groups.compare_groups) as `hoplab compare`
    prints it: title, sides, table, warnings and notes; `link` % id makes ids links."""
    def ids(xs: Sequence[int]) -> str:
        if link is None:
            return ", ".join(str(i) for i in xs)
        return ", ".join(f'<a href="{esc(link % i)}">{i}</a>' for i in xs)
    parts = []
    for g in result.groups:
        sides = " against ".join(f"{name} = {esc(label)}" for name, label in
                                 (("B", g.b_label), ("A", g.a_label)) if label)
        notes = "".join(f'<p class="note">warning: {esc(w)}</p>' for w in g.warnings)
        notes += "".join(f'<p class="note">note: {esc(n)}</p>' for n in view.notes(g, alpha))
        parts.append(f'<section class="comparison" data-group="{esc(g.title)}">'
                     f"<h3>{esc(g.title)}{': ' + sides if sides else ''}</h3>"
                     f'<p class="note">A: runs {ids(g.a_ids)}; B: runs {ids(g.b_ids)}.</p>'
                     f"{comparison_table(view.ordered(g), alpha)}{notes}</section>")
    parts += [f'<p class="note">not compared: {esc(u)}</p>' for u in result.unmatched]
    parts.append(f'<p class="note">One observation per run (per page load for the medians of '
                 f"page loads). {esc(view.legend(result))}</p>")
    return Html("".join(parts))
