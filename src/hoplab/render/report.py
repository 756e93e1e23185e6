"""`hoplab report`: stored runs as one self-contained HTML file.

Everything is inside the file: plotly.js (inlined once), the figures' data, the
metadata and the tables, so it opens offline, from a mail or a CI artifact, years
later. Several runs of one test that fall into two groups (by variant, else by
labels) get a comparison with verdicts; other sets get one headline row per run.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hoplab import __version__
from hoplab.analysis.compare import MetricComparison, compare_runs
from hoplab.errors import UsageError
from hoplab.record import RunRecord
from hoplab.render import charts
from hoplab.render.decimate import DEFAULT_POINTS
from hoplab.render.html import (
    CSS,
    DRAW_JS,
    Html,
    chart,
    comparison_table,
    esc,
    headline_table,
    metadata_details,
    run_header,
    run_tables,
)
from hoplab.render.profile_html import data_uri, flamegraph_svg, folded_of, profile_section
from hoplab.render.summary import _sort_key
from hoplab.render.units import pairs
from hoplab.store import RunSummary


@dataclass(frozen=True)
class Comparison:
    title: str                  # experiment/test
    a: str                      # what side A is: "qos=off"
    b: str
    a_ids: tuple[int, ...]
    b_ids: tuple[int, ...]
    rows: tuple[MetricComparison, ...]


@functools.cache
def plotly_js() -> str:
    """The plotly.js bundle the installed plotly ships (no CDN, no network)."""
    from plotly.offline import get_plotlyjs

    text: str = get_plotlyjs()
    # Inline in <script>, a "</script" inside would end the bundle early.
    return text.replace("</script", "<\\/script")


def summary_of(rec: RunRecord) -> RunSummary:
    assert rec.id is not None
    whole = {m.name: m.value for m in reversed(rec.metrics)
             if m.flow is None and m.node is None and m.key is None}
    return RunSummary(id=rec.id, experiment=rec.experiment, experiment_id=rec.experiment_id,
                      test=rec.test, kind=rec.kind, repetition=rec.repetition,
                      status=rec.status, started_at=rec.started_at,
                      duration_s=rec.duration_s, variant=rec.variant, labels=rec.labels,
                      metrics=whole)


def _two_sides(runs: Sequence[RunRecord]) -> tuple[str, str, list[RunRecord],
                                                    list[RunRecord]] | None:
    for what in ("variant", "labels"):
        sides: dict[str, list[RunRecord]] = {}
        for r in runs:
            sides.setdefault(pairs(getattr(r, what)), []).append(r)
        if len(sides) == 2:
            (a, ra), (b, rb) = sorted(sides.items(),
                                      key=lambda kv: _sort_key(getattr(kv[1][0], what)))
            return a, b, ra, rb
    return None


def comparisons(runs: Sequence[RunRecord]) -> list[Comparison]:
    """Per experiment and test, A against B where its runs split into exactly two groups
    by variant (else by labels); A is the lower value (qos=off before qos=on, hops=1
    before hops=2). Custom tests compare per flow too: their flows have different jobs."""
    by_test: dict[tuple[str, str], list[RunRecord]] = {}
    for r in runs:
        if r.status == "ok":
            by_test.setdefault((r.experiment, r.test), []).append(r)
    out = []
    for (experiment, test), group in by_test.items():
        sides = _two_sides(group)
        if sides is None:
            continue
        a, b, ra, rb = sides
        try:
            rows = compare_runs(ra, rb, per_flow=ra[0].kind == "custom")
        except UsageError:
            continue        # e.g. different measurement versions: not comparable
        out.append(Comparison(f"{experiment}/{test}", a, b, tuple(r.id or 0 for r in ra),
                              tuple(r.id or 0 for r in rb), tuple(rows)))
    return out


def comparison_section(c: Comparison, link: str | None = None) -> Html:
    def ids(xs: Sequence[int]) -> str:
        if link is None:
            return ", ".join(str(i) for i in xs)
        return ", ".join(f'<a href="{esc(link % i)}">{i}</a>' for i in xs)
    return Html(f"<h3>{esc(c.title)}: B = {esc(c.b)} against A = {esc(c.a)}</h3>"
                f'<p class="note">A: runs {ids(c.a_ids)}; B: runs {ids(c.b_ids)}. One '
                "observation per run; verdict from a Mann-Whitney test and a bootstrap "
                "confidence interval of the change of medians.</p>"
                + comparison_table(c.rows))


def page(title: str, body: str, head: str = "") -> str:
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><meta name=\"viewport\" "
            f"content=\"width=device-width\"><style>{CSS}</style>{head}</head>"
            f"<body>{body}</body></html>")


def run_section(rec: RunRecord, budget: int, cdf: bool) -> str:
    parts = [f'<h2 id="run-{rec.id}">Run {rec.id}: {esc(rec.experiment)} / {esc(rec.test)} '
             f"({esc(pairs(rec.variant))}, repetition {rec.repetition})</h2>",
             run_header(rec)]
    parts += [chart(c) for c in charts.run_charts(rec, budget)
              if cdf or not c.id.startswith("cdf")]
    parts.append(run_tables(rec))
    svg = flamegraph_svg(rec, folded_of(rec))
    parts.append(profile_section(rec, data_uri(svg) if svg else None))
    parts.append(metadata_details(rec))
    return "".join(parts)


def build_report(runs: Sequence[RunRecord], store: str,
                 budget: int = DEFAULT_POINTS) -> str:
    """The report of `runs` (with their series) as one HTML document."""
    if not runs:
        raise UsageError("no runs to report")
    title = (f"hoplab run {runs[0].id}" if len(runs) == 1
             else f"hoplab report: {len(runs)} runs")
    body: list[str] = [f"<h1>{esc(title)}</h1>",
                       f'<p class="note">from {esc(store)}, made {esc(_now())} by hoplab '
                       f"{esc(__version__)}. Charts with more points than a screen has pixels "
                       "are thinned (each bucket's lowest and highest point kept; the legend "
                       "and caption say so); the tables hold the exact figures.</p>"]
    if len(runs) > 1:
        body += ["<h2>Runs</h2>", headline_table([summary_of(r) for r in runs], "#run-%d")]
        found = comparisons(runs)
        if found:
            body.append("<h2>Comparison</h2>")
            body += [comparison_section(c, "#run-%d") for c in found]
    cdf = charts.latency_cdf(runs)
    if cdf is not None and len(runs) > 1:
        body += ["<h2>Latency across runs</h2>", chart(cdf)]
    body += [run_section(rec, budget, cdf=len(runs) == 1) for rec in runs]
    head = f"<script>{plotly_js()}</script><script>{DRAW_JS}</script>"
    return page(title, "".join(body), head)


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")
