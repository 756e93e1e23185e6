"""The dashboard's home: what changed (analysis/changes.py decides; this only renders).

One row per change, the largest regression first: the metric, the series, between
which values, the medians before and after, the change with its interval, p, the runs,
and links to the trend (the step marked), to the comparison of the two values' runs,
and the `hoplab bisect run` line that would find the commit. Steady series are a
count that opens into a list."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from hoplab import metrics
from hoplab.analysis import verdicts
from hoplab.analysis.changes import TIME, Change, Series, WhatChanged, notes_of
from hoplab.analysis.groups import Comparison
from hoplab.analysis.trend import shown
from hoplab.kinds import HEADLINES
from hoplab.render.answer import comparison_answer, more_answers
from hoplab.render.comparison import interval, pct
from hoplab.render.html import Html, esc
from hoplab.render.units import figure, id_list
from hoplab.store import Annotation

STEADY_SHOWN = 500          # steady series listed at most (the count says how many)


@dataclass(frozen=True)
class Latest:
    """The latest experiment (the newest run's invocation) and its comparison, its runs
    split in two as `hoplab report` splits them (render/report.py comparison)."""

    experiment: str
    experiment_id: str
    ids: tuple[int, ...]
    result: Comparison
    # An n-way matrix's other values against the first (hops=4 after hops=2, both
    # against hops=1).
    more: tuple[Comparison, ...] = ()


def latest_html(latest: Latest) -> str:
    """The latest experiment's answer, as the report's first screen gives it."""
    first = latest.result.groups[0]
    sides = [f"experiment_id={latest.experiment_id},{label}" if label and "=" in label
             else "" for label in (first.a_label, first.b_label)]
    more = [f'<a href="/runs?{esc(urlencode({"experiment_id": latest.experiment_id}))}">'
            "its runs</a>"]
    if all(sides):
        more.insert(0, f'<a href="/compare?{esc(urlencode({"a": sides[0], "b": sides[1]}))}">'
                       "the comparison in full</a>")
    return (f'<section id="latest"><h2>The latest experiment: {esc(latest.experiment)} '
            f'<span class="note">({len(latest.ids)} runs, {esc(latest.experiment_id)})'
            f"</span></h2>{comparison_answer(latest.result)}{more_answers(latest.more)}"
            f'<p class="note">{" · ".join(more)}</p></section>')


def trend_link(series: Series, metric: str, step: str | float | None = None) -> str:
    params = {"metric": metric, "by": series.by, "order": series.order,
              **series.filters()}
    if step is not None:
        params["step"] = shown(step, series.by)
    return "/trend?" + urlencode(params)


def compare_link(change: Change) -> str:
    return "/compare?" + urlencode({"a": id_list(change.runs_before).replace(" ", ""),
                                    "b": id_list(change.runs_after).replace(" ", "")})


def bisect_line(change: Change) -> str | None:
    """The `hoplab bisect run` that would find the commit of this change; None for a
    series ordered by time, which names no revisions."""
    series = change.series
    if series.by in TIME:
        return None
    words = ["sudo", "hoplab", "bisect", "run", change.experiment_file or "EXPERIMENT.toml",
             "--repo", "REPO", "--good", shown(change.before, series.by),
             "--bad", shown(change.after, series.by), "--metric", change.metric]
    for k, v in series.labels:
        words += ["--label", f"{k}={v}"]
    return " ".join(shlex.quote(w) for w in words)


def _row(c: Change, notes: Sequence[Annotation]) -> str:
    name = c.metric
    cls = {verdicts.WORSE: "worse", verdicts.BETTER: "better"}.get(c.verdict, "na")
    what = {"step": "change point", "baseline": "latest runs against the pinned baseline"
            }.get(c.source, "latest runs")
    ci_text = interval(*c.ci_pct)
    rests = (f"stretches of {c.n_before}+{c.n_after} repetitions" if c.source == "step"
             else f"{c.n_before}+{c.n_after} runs")
    runs = (f'<a href="{esc(compare_link(c))}">{esc(id_list(c.runs_before))} → '
            f'{esc(id_list(c.runs_after))}</a><br><span class="note">{rests}</span>')
    line = bisect_line(c)
    bisect = (f'<details><summary>bisect</summary><code class="cmd">{esc(line)}</code>'
              "</details>" if line else
              '<span class="note">ordered by time: label runs version= or commit= '
              "to bisect</span>")
    return (f'<tr class="change" data-series="{esc(c.series.title)}" '
            f'data-metric="{esc(name)}">'
            f'<td><span class="verdict {cls}">{esc(verdicts.word(c.verdict))}</span></td>'
            f"<td>{esc(metrics.label(name))}</td><td>{esc(c.series.title)}</td>"
            f"<td>{esc(between(c))}<br><span class=\"note\">{what}</span>"
            f"{_notes(notes_of(c, notes))}</td>"
            f'<td class="n">{esc(figure(c.median_before, name))} → '
            f"{esc(figure(c.median_after, name))}</td>"
            f'<td class="n pct">{esc(pct(c.change_pct))}'
            f'{"<br>" + esc(ci_text) if ci_text else ""}</td>'
            f'<td class="n">{esc(_p(c.p))}</td><td>{runs}</td>'
            f'<td><a href="{esc(trend_link(c.series, name, c.after))}">trend</a> · '
            f'<a href="{esc(compare_link(c))}">compare</a>{bisect}</td></tr>')


def _notes(found: Sequence[Annotation]) -> str:
    return "".join(f'<div class="annotation">✎ {esc(n.where)}: {esc(n.text)}</div>'
                   for n in found)


def between(c: Change) -> str:
    return f"{shown(c.before, c.series.by)} → {shown(c.after, c.series.by)}"


def sentence(c: Change) -> str:
    """A change in words, as the answer leads with it: "nat / nat-bulk: goodput -49.0 %
    [-50.3, -47.0] worse, v45 → v46"."""
    ci_text = interval(*c.ci_pct)
    return (f"{c.series.title}: {metrics.label(c.metric)} {pct(c.change_pct)}"
            f"{' ' + ci_text if ci_text else ''} {verdicts.word(c.verdict)}, {between(c)}")


def _p(p: float | None) -> str:
    return "-" if p is None or math.isnan(p) else f"{p:.2g}"


def changes_table(found: WhatChanged, notes: Sequence[Annotation] = ()) -> Html:
    head = "".join(f"<th{' class=n' if n else ''}>{h}</th>" for h, n in (
        ("", 0), ("metric", 0), ("series", 0), ("between", 0), ("before → after", 1),
        ("change, 95 % CI", 1), ("p", 1), ("runs", 0), ("", 0)))
    return Html(f'<div class="wide"><table id="changes" class="cards"><thead><tr>{head}'
                f"</tr></thead><tbody>{''.join(_row(c, notes) for c in found.changes)}</tbody>"
                "</table></div>")


def _steady(found: WhatChanged) -> str:
    if not found.steady and not found.cannot_tell:
        return ""
    items = []
    for s in found.steady[:STEADY_SHOWN]:
        first = next(iter(HEADLINES.get(s.kind, ())), "")
        link = f' (<a href="{esc(trend_link(s, first))}">trend</a>)' if first else ""
        items.append(f"<li>{esc(s.title)} by {esc(s.by)}{link}</li>")
    more = len(found.steady) - STEADY_SHOWN
    if more > 0:
        items.append(f"<li>and {more} more</li>")
    short = (f"; {found.cannot_tell:,} more too short to tell (fewer than 4 values, and "
             "too few runs on their latest two for a comparison)" if found.cannot_tell
             else "")
    return (f'<details id="steady"><summary>{len(found.steady):,} series with no change'
            f"{esc(short)}</summary><ul>{''.join(items)}</ul></details>")


def home_body(found: WhatChanged, notes: Sequence[Annotation] = (),
              latest: Latest | None = None) -> str:
    """The answer, the table of changes (with the annotations that belong beside each:
    analysis/changes.py notes_of) and the steady series; the latest experiment's
    comparison first when nothing changed over any series (a store of one experiment:
    `make demo`'s), else after the changes."""
    top, count = found.state
    said = (f"{found.series:,} series of {found.runs:,} finished runs (the store holds "
            f"{count:,} runs, up to run {top}). A series: the runs of one experiment, test, "
            "variant and labels, by version, else commit, else time (each invocation of "
            "the experiment); its latest change point (as <code>hoplab trend</code> finds "
            "it) and its latest runs against the value before them (as <code>hoplab "
            "compare</code> judges them), for its test kind's headline figures.")
    if not found.changes and found.series and found.cannot_tell == found.series:
        answer = (f'<p id="answer" class="answer">no change over time: the {found.series:,} '
                  "series are too short to tell yet</p>")
    elif not found.changes:
        answer = f'<p id="answer" class="answer">no change in {found.series:,} series</p>'
    else:
        lead = found.changes[0]
        counts = []
        for verdict in (verdicts.WORSE, verdicts.BETTER):
            n = sum(c.verdict == verdict for c in found.changes) - (lead.verdict == verdict)
            if n:
                more = "more " if lead.verdict == verdict else ""
                counts.append(f"{n} {more}{verdicts.word(verdict)}")
        touched = len({c.series for c in found.changes})
        rest = (", ".join(counts) + ", " if counts else "") + \
            f"in {touched} of {found.series:,} series"
        answer = (f'<p id="answer" class="answer">{esc(sentence(lead))}; {esc(rest)}</p>'
                  f"{changes_table(found, notes)}")
    if latest is None:
        return f'{answer}{_steady(found)}<p class="note">{said}</p>'
    if found.changes:
        return f'{answer}{latest_html(latest)}{_steady(found)}<p class="note">{said}</p>'
    return f'{latest_html(latest)}{answer}{_steady(found)}<p class="note">{said}</p>'


def pending(found: WhatChanged | None, state: tuple[int, int]) -> str:
    """What the page says while the store is still being judged (it reloads itself)."""
    top, count = state
    if found is None:
        return (f'<p id="pending" class="note">working out what changed in the store\'s '
                f"{count} runs (the first time takes seconds for a large store); this page "
                "reloads itself</p>")
    return (f'<p id="pending" class="note">as of run {found.state[0]}; the runs since (up '
            f"to run {top}) are being judged, and this page reloads itself</p>")


def changes_json(found: WhatChanged, notes: Sequence[Annotation] = ()) -> dict[str, object]:
    """/api/changes: what the home shows, JSON-ready (numbers not computed are None)."""
    def one(c: Change) -> dict[str, object]:
        return {"series": c.series.title, "filters": c.series.filters(), "by": c.series.by,
                "order": c.series.order, "metric": c.metric, "source": c.source,
                "before": c.before, "after": c.after, "median_before": c.median_before,
                "median_after": c.median_after, "change_pct": c.change_pct,
                "ci_pct": list(c.ci_pct), "p": c.p, "verdict": c.verdict,
                "runs_before": list(c.runs_before), "runs_after": list(c.runs_after),
                "trend": trend_link(c.series, c.metric, c.after), "compare": compare_link(c),
                "bisect": bisect_line(c),
                "annotations": [n.id for n in notes_of(c, notes)]}
    return {"state": {"top": found.state[0], "runs": found.state[1]},
            "series": found.series, "finished_runs": found.runs,
            "cannot_tell": found.cannot_tell, "changes": [one(c) for c in found.changes],
            "steady": [s.title for s in found.steady]}
