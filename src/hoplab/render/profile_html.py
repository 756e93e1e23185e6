"""A run's CPU profile as HTML, for the report and the dashboard: what was sampled and how
it is attributed, time by category, the top symbols, and the flame graph itself."""

from __future__ import annotations

from hoplab.errors import HoplabError
from hoplab.profile import fold
from hoplab.profile.flamegraph import flamegraph
from hoplab.record import RunRecord
from hoplab.render.html import Html, esc, table

FOLDED = "profile folded"


def flamegraph_svg(rec: RunRecord, folded: bytes | None) -> str | None:
    """The run's interactive flame graph, or None when there is no profile or inferno."""
    if folded is None:
        return None
    stacks = fold.without_pids(fold.parse(folded.decode("utf-8", "replace")))
    try:
        return flamegraph(fold.render(stacks), title=f"run {rec.id}: {rec.experiment} "
                                                     f"{rec.test}")
    except HoplabError:
        return None


def folded_of(rec: RunRecord) -> bytes | None:
    return next((r.data for r in rec.raw if r.name == FOLDED), None)


FLAME_HEIGHT = 600


def profile_section(rec: RunRecord, svg_src: str | None, graph: Html | None = None) -> Html:
    """svg_src: where the flame graph is (a URL in the dashboard), or None to leave it out;
    or `graph`, the element that shows it (a report's packed copy, page.packed_svg)."""
    prof = rec.metadata.get("profile")
    if not isinstance(prof, dict):
        return Html("")
    head = "<h3>CPU profile</h3>"
    if prof.get("status") != "ok":
        return Html(f'{head}<p class="note">no profile: {esc(prof.get("reason"))} (the run '
                    f"itself was measured and kept)</p>")
    note = (f'<p class="note">{esc(prof["samples"])} samples at {esc(prof["frequency"])} Hz '
            f'during {esc(prof["phase"])}; {esc(prof["attribution"])}.</p>')
    cats = table(["category", "share"], [(k, f"{v:.1f} %")
                                         for k, v in prof.get("categories", {}).items()],
                 numeric=[1])
    top = table(["self", "symbol"], [(f"{p:.2f} %", s) for s, p in prof.get("top", [])],
                numeric=[0])
    nodes = table(["node", "processes", "samples", "share of host"],
                  [(n, "all (a device)" if d.get("whole_machine") else len(d["pids"]),
                    d["samples"], f"{d['share_of_host']:.1f} %")
                   for n, d in prof.get("by_node", {}).items()], numeric=[1, 2, 3])
    if graph is None and svg_src is not None:
        graph = Html(f'<object class="flame" type="image/svg+xml" data="{esc(svg_src)}" '
                     f'width="100%" height="{FLAME_HEIGHT}">flame graph</object>')
    if graph is not None:
        graph = Html(f'{graph}<p class="note">hover for counts, click to zoom, Ctrl-F to '
                     "search</p>")
    return Html(f"{head}{note}<h4>time by category</h4>{cats}<h4>top symbols by self time"
                f"</h4>{top}<h4>processes of the profiled nodes</h4>{nodes}{graph or ''}")

