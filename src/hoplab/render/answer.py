"""The report's first screen: the answer before the evidence (issue 21).

What was compared, the verdict counts and the biggest changes with their intervals
(the comparison compare_groups made, led by the headline every view leads with), or,
over a version history, its change points, largest regression first. Rendering only:
analysis decides every figure and its order (analysis/verdicts.py rank)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hoplab import metrics
from hoplab.analysis import verdicts
from hoplab.analysis.changes import Change, direction
from hoplab.analysis.compare import MetricComparison
from hoplab.analysis.groups import Comparison, GroupComparison
from hoplab.analysis.trend import Trend, TrendChange, shown
from hoplab.render import comparison as view
from hoplab.render.html import Html, esc, table
from hoplab.render.units import figure

SHOWN = 5                   # changes listed on the first screen; the rest follow below
HEADLINE_ROWS = 10          # of the headline figures, at most (several test groups)


def _verdict(word: str, verdict: str) -> Html:
    cls = {verdicts.WORSE: "worse", verdicts.BETTER: "better",
           verdicts.SAME: "same"}.get(verdict, "na")
    return Html(f'<span class="verdict {cls}">{esc(word)}</span>')


def _counts(result: Comparison) -> str:
    n = view.counts(result)
    said = [f"{n[key]} {name}" for key, name in (
        ("worse", "worse"), ("better", "better"), ("same", "same"),
        ("unclear", verdicts.word(verdicts.UNCLEAR)), ("without", "without a verdict"))
        if n[key]]
    return " · ".join(said)


def _could_see(pct: float) -> str:
    """What a "no clear difference" could have seen: ", would see ±8.2 %"."""
    return "" if not math.isfinite(pct) else f" (these runs would see ±{pct:.1f} %)"


def first_rows(result: Comparison) -> list[tuple[GroupComparison, MetricComparison]]:
    """The rows of the first screen: every test's headline figures, whatever their
    verdict (what the runs can say of each, and what they cannot: a "no clear
    difference" says the change these runs would have seen), in the one order of
    changes; without headline figures, the biggest changes."""
    rows = view.biggest(result)
    heads = [gm for gm in rows if view.is_headline(*gm)]
    return heads[:HEADLINE_ROWS] if heads else rows[:SHOWN]


def comparison_answer(result: Comparison) -> Html:
    """The headline, what was compared, the counts, and the biggest changes."""
    first = result.groups[0]
    a, b = first.a_label or "A", first.b_label or "B"
    a_ids = sorted({i for g in result.groups for i in g.a_ids})
    b_ids = sorted({i for g in result.groups for i in g.b_ids})
    tests = len(result.groups)
    what = (f"{b} against {a}: {view.runs(b_ids)} against {view.runs(a_ids)}, compared "
            f"test by test and variant by variant ({tests} group{'s' * (tests != 1)})")
    several = tests > 1
    rows = [((g.title + ": " if several else "") + view.row_name(m),
             f"{figure(m.a_median, m.metric, m.unit)} → {figure(m.b_median, m.metric, m.unit)}",
             view.pct(m.change_pct), view.interval(m.ci_low_pct, m.ci_high_pct) or "-",
             "-" if m.p_value is None else f"{m.p_value:.2g}",
             _verdict(view.verdict(m) + _could_see(m.detectable_pct), m.verdict))
            for g, m in first_rows(result)]
    return Html(f'<p class="answer" id="headline">{esc(view.headline(result, a, b))}</p>'
                f'<p class="note">{esc(what)}</p><p id="counts">{esc(_counts(result))}</p>'
                + table(("metric", "A → B", "change", "95 % CI", "p", "verdict"), rows,
                        numeric=(2, 3, 4), cls="cards biggest"))


def _steps(trends: Sequence[Trend]) -> list[tuple[Trend, TrendChange, str]]:
    found = [(t, c, direction(t.metric.partition("@")[0], c.point.change_pct))
             for t in trends for c in t.changes]
    return sorted(found, key=lambda x: verdicts.rank(x[2], x[1].point.change_pct))


def trend_answer(trends: Sequence[Trend]) -> Html:
    """Over a version history: every change point of every series and metric, largest
    regression first, and which series and metrics did not change."""
    by = trends[0].by
    values = max(len(t.points) for t in trends)
    steps = _steps(trends)
    what = (f"a history of {values} values of {by}: {len({t.title for t in trends})} "
            f"series, {len(trends)} metrics followed (change points as `hoplab trend` "
            "finds them)")
    if not steps:
        return Html(f'<p class="answer" id="headline">no change point by {esc(by)}</p>'
                    f'<p class="note">{esc(what)}</p>')
    t, c, verdict = steps[0]
    lead = (f"{t.title}: {metrics.label(t.metric)} {view.pct(c.point.change_pct)} "
            f"{view.interval(*c.point.ci_pct)} {verdicts.word(verdict)}, "
            f"{shown(c.before, by)} → {shown(c.after, by)}").replace("  ", " ")
    more = len(steps) - 1
    rows = [(f"{tt.title}: {metrics.label(tt.metric)}",
             f"{shown(cc.before, by)} → {shown(cc.after, by)}",
             f"{figure(cc.point.median_before, tt.metric)} → "
             f"{figure(cc.point.median_after, tt.metric)}",
             view.pct(cc.point.change_pct), view.interval(*cc.point.ci_pct) or "-",
             f"{cc.point.p:.2g}" if math.isfinite(cc.point.p) else "-",
             _verdict(verdicts.word(v), v)) for tt, cc, v in steps[:SHOWN]]
    return Html(f'<p class="answer" id="headline">{esc(lead)}'
                f"{esc(f'; {more} more change point' + 's' * (more != 1)) if more else ''}"
                f'</p><p class="note">{esc(what)}</p>'
                + table(("series: metric", by, "before → after", "change", "95 % CI", "p",
                         "verdict"), rows, numeric=(3, 4, 5), cls="cards biggest"))


def pinned_answer(changes: Sequence[Change]) -> Html:
    """The latest runs of the series with a pinned baseline (`hoplab baseline`), judged
    against it (analysis/changes.py pinned_changes), largest regression first."""
    def between(c: Change) -> str:
        return f"{shown(c.before, c.series.by)} → {shown(c.after, c.series.by)}"

    lead = changes[0]
    more = len(changes) - 1
    said = (f"against the pinned baseline: {lead.series.title}: {metrics.label(lead.metric)} "
            f"{view.pct(lead.change_pct)} {view.interval(*lead.ci_pct)} "
            f"{verdicts.word(lead.verdict)}, {between(lead)}").replace("  ", " ")
    rows = [(f"{c.series.title}: {metrics.label(c.metric)}", between(c),
             f"{figure(c.median_before, c.metric)} → {figure(c.median_after, c.metric)}",
             view.pct(c.change_pct), view.interval(*c.ci_pct) or "-",
             "-" if c.p is None else f"{c.p:.2g}", _verdict(verdicts.word(c.verdict), c.verdict))
            for c in changes[:SHOWN]]
    return Html(f'<p class="answer" id="pinned">{esc(said)}'
                f"{esc(f'; {more} more' if more else '')}</p>"
                + table(("series: metric", "baseline → latest", "before → after", "change",
                         "95 % CI", "p", "verdict"), rows, numeric=(3, 4, 5),
                        cls="cards biggest"))


def more_answers(more: Sequence[Comparison]) -> str:
    """The comparisons after the first of an n-way matrix (hops=4 against hops=1 after
    hops=2 against it), each as the first is given, its headline no second #headline."""
    return "".join(str(comparison_answer(c)).replace(' id="headline"', "", 1) for c in more)


def answer_html(result: Comparison | None, why: str, trends: Sequence[Trend],
                runs: int, pinned: Sequence[Change] = (),
                more: Sequence[Comparison] = ()) -> Html:
    """The first screen of a report of `runs` runs (several); `pinned`: the latest runs
    against their series' pinned baselines, first when there are any; `more`: the other
    values of an n-way matrix against the first, after `result`."""
    parts = ['<section id="answer">']
    if pinned:
        parts.append(str(pinned_answer(pinned)))
    if trends:
        parts.append(str(trend_answer(trends)))
    if result is not None:
        parts.append(str(comparison_answer(result)) + more_answers(more))
    if not trends and result is None:
        parts.append(f'<p class="answer" id="headline">{esc(why)}</p>')
    parts.append(f'<p class="note">Below: the details and charts, each run, then <a '
                 f'href="#runs">the table of all {runs} runs</a>.</p></section>')
    return Html("".join(parts))
