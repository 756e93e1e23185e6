"""`hoplab report`: stored runs as one self-contained HTML file.

Everything is inside the file: plotly.js (once, packed: render/page.py), the figures' data, the
metadata and the tables, so it opens offline, from a mail or a CI artifact, years
later. Runs that split into two sides (by one variant key, else by one label key) get
the comparison `hoplab compare` would print for those sides, with its verdicts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from hoplab import __version__, kinds
from hoplab.analysis.changes import Change
from hoplab.analysis.groups import Comparison, compare_groups, split_values
from hoplab.analysis.trend import Trend, shown, trends_of_runs
from hoplab.errors import UsageError
from hoplab.record import RunRecord
from hoplab.render import charts
from hoplab.render.answer import answer_html
from hoplab.render.decimate import DEFAULT_POINTS
from hoplab.render.html import (
    chart,
    comparison_html,
    esc,
    headline_table,
    metadata_details,
    run_header,
    run_tables,
)
from hoplab.render.page import packed_svg, page, standalone_scripts
from hoplab.render.profile_html import (
    FLAME_HEIGHT,
    flamegraph_svg,
    folded_of,
    profile_section,
)
from hoplab.render.trend_html import change_points_html, note_places, notes_html, trend_chart
from hoplab.render.units import pairs
from hoplab.store import Annotation, RunSummary


def summary_of(rec: RunRecord) -> RunSummary:
    assert rec.id is not None
    whole = {m.name: m.value for m in reversed(rec.metrics)
             if m.flow is None and m.node is None and m.key is None}
    return RunSummary(id=rec.id, experiment=rec.experiment, experiment_id=rec.experiment_id,
                      test=rec.test, kind=rec.kind, repetition=rec.repetition,
                      status=rec.status, started_at=rec.started_at,
                      duration_s=rec.duration_s, variant=rec.variant, labels=rec.labels,
                      metrics=whole)


def comparison(runs: Sequence[RunRecord]) -> tuple[Comparison | None, str]:
    """The runs' comparison, as `hoplab compare` makes it, when they split into sides by
    one key (analysis.groups.split_values): the second value against the first; else None
    and why. comparisons gives every value against the first."""
    found, why = comparisons(runs)
    return (found[0] if found else None), why


def comparisons(runs: Sequence[RunRecord]) -> tuple[list[Comparison], str]:
    """Each value of the one key the runs split by against its first value (hops=2 and
    hops=4 against hops=1: an n-way matrix's summary), as `hoplab compare` makes them;
    else [] and why."""
    sides = split_values(runs)
    if sides is None:
        return [], ("no comparison: the runs do not split into sides by one variant or "
                    "label key; `hoplab compare A B` compares any two selections")
    key, (first, *rest) = sides
    try:
        # As `hoplab compare`: custom tests compare each flow too.
        return [compare_groups(first, b, per_flow=kinds.per_flow) for b in rest], ""
    except UsageError as exc:       # e.g. different measurement versions: not comparable
        return [], f"no comparison by {key}: {exc}"


def run_section(rec: RunRecord, budget: int, cdf: bool) -> str:
    parts = [f'<h2 id="run-{rec.id}">Run {rec.id}: {esc(rec.experiment)} / {esc(rec.test)} '
             f"({esc(pairs(rec.variant))}, repetition {rec.repetition})</h2>"]
    # Figures first, then what the run was (host, tools, phases).
    parts += [chart(c) for c in charts.run_charts(rec, budget)
              if cdf or not c.id.startswith("cdf")]
    parts += [run_tables(rec), run_header(rec)]
    svg = flamegraph_svg(rec, folded_of(rec))
    graph = None if svg is None else packed_svg(f"flame-{rec.id}", svg, "flame", FLAME_HEIGHT)
    parts.append(profile_section(rec, None, graph))
    parts.append(metadata_details(rec))
    return "".join(parts)


def build_report(runs: Sequence[RunRecord], store: str,
                 budget: int = DEFAULT_POINTS, notes: Sequence[Annotation] = (),
                 pinned: Sequence[Change] = ()) -> str:
    """The report of `runs` (with their series) as one HTML document: the answer first
    (render/answer.py), then the details and charts, each run, and the runs table last;
    `notes`: the store's annotations, drawn on the trend charts they fall on; `pinned`:
    the latest runs against their series' pinned baselines (changes.pinned_changes)."""
    if not runs:
        raise UsageError("no runs to report")
    title = (f"hoplab run {runs[0].id}" if len(runs) == 1
             else f"hoplab report: {len(runs)} runs")
    body: list[str] = [f"<h1>{esc(title)}</h1>"]
    made = (f'<p class="note">from {esc(store)}, made {esc(_now())} by hoplab '
            f"{esc(__version__)}. Charts with more points than a screen has pixels are "
            "thinned (each bucket's lowest and highest point kept; the legend and caption "
            "say so); the tables hold the exact figures.</p>")
    if len(runs) > 1:
        every, why = comparisons(runs)
        trends = trends_of_runs(runs)
        body += [answer_html(every[0] if every else None, why, trends, len(runs), pinned,
                             more=every[1:]), made]
        for found in every:
            body += ["<h2>Comparison</h2>", comparison_html(found, link="#run-%d")]
        body += trend_sections(trends, notes)
    else:
        body.append(made)
    cdf = charts.latency_cdf(runs)
    if cdf is not None and len(runs) > 1:
        body += ["<h2>Latency across runs</h2>", chart(cdf)]
    body += [run_section(rec, budget, cdf=len(runs) == 1) for rec in runs]
    if len(runs) > 1:
        body += ['<h2 id="runs">Runs</h2>',
                 headline_table([summary_of(r) for r in runs], "#run-%d")]
    return page(title, "".join(body), standalone_scripts())


def trend_sections(found: Sequence[Trend], notes: Sequence[Annotation] = ()) -> list[str]:
    """When the runs are a series (many versions), each metric's change points as
    `hoplab trend` finds them (analysis/trend.py trends_of_runs): a chart with the steps
    marked and their table for metrics that changed, one line naming those that did not."""
    if not found:
        return []
    out = [f"<h2>Change points by {esc(found[0].by)}</h2>"]
    for i, t in enumerate(found):
        if t.changes:
            places = note_places([shown(p.value, t.by) for p in t.points],
                                 [p.started_at for p in t.points], t.by, notes)
            out += [f"<h3>{esc(t.title)}: {esc(t.metric)}</h3>",
                    chart(trend_chart(t, f"trend-{i}", notes)), notes_html(places),
                    change_points_html(t)]
    steady = [f"{t.title}: {t.metric}" for t in found if not t.changes]
    if steady:
        out.append(f'<p class="note">no change point in {esc(", ".join(steady))}</p>')
    return out


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")
