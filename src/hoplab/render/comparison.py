"""What every front end shows of a comparison (analysis.groups.compare_groups): the
order of its rows, the notes under a group, and its JSON form. The CLI, the HTML
report and the dashboard render these; none of them groups runs or judges."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from hoplab.analysis.sizes import runs_per_side
from hoplab.analysis.verdicts import BETTER, SAME, UNCLEAR, WORSE, rank, word
from hoplab.jsonsafe import json_safe
from hoplab.render.headline import HEADLINE
from hoplab.render.units import metric_name
from hoplab.render.units import notes as metric_notes

if TYPE_CHECKING:
    # Types only: analysis imports numpy, which a CLI's --help should not pay for.
    from hoplab.analysis.compare import MetricComparison
    from hoplab.analysis.groups import Comparison, GroupComparison


def ordered(g: GroupComparison, explicit: bool = False) -> list[MetricComparison]:
    """The rows of a group: as asked for when `explicit`, else the test kind's headline
    figures first, then the other whole-run ones, then each flow's."""
    if explicit:
        return list(g.metrics)
    first = HEADLINE.get(g.kind, ())
    return sorted(g.metrics, key=lambda m: (
        m.flow is not None, first.index(m.metric) if m.metric in first else len(first)))


def row_name(m: MetricComparison) -> str:
    return metric_name(m.metric, m.flow, m.node, m.key)


def pct(x: float) -> str:
    # Adding 0.0 turns a rounded -0.0 into 0.0: "-0.0 %" reads as a loss that is not there.
    return "-" if math.isnan(x) else f"{round(x, 1) + 0.0:+.1f} %"


def ci(m: MetricComparison) -> str:
    return "-" if math.isnan(m.ci_low_pct) else \
        f"{pct(m.ci_low_pct)[:-2]} .. {pct(m.ci_high_pct)}"


def runs(ids: tuple[int, ...] | list[int]) -> str:
    shown = ", ".join(map(str, ids[:8])) + (", ..." if len(ids) > 8 else "")
    return f"{len(ids)} run{'s' * (len(ids) != 1)} ({shown})"


def size(m: MetricComparison, side: str) -> str:
    """What a side's figures rest on: "3" runs, or "24 loads / 3 runs" for a median
    judged on every trial."""
    values, runs = (m.a_values, m.a_runs) if side == "a" else (m.b_values, m.b_runs)
    return str(len(values)) if m.per == "run" else f"{len(values)} {m.per}s / {runs} runs"


def sizes(m: MetricComparison) -> str:
    """Both sides: "3+3", or "24+24 loads / 3+3 runs"."""
    if m.per == "run":
        return f"{len(m.a_values)}+{len(m.b_values)}"
    return f"{len(m.a_values)}+{len(m.b_values)} {m.per}s / {m.a_runs}+{m.b_runs} runs"


def verdict(m: MetricComparison) -> str:
    """A row's verdict in words ("no clear difference" for unclear)."""
    return word(m.verdict)


def notes(g: GroupComparison, alpha: float) -> list[str]:
    """Why rows of a group have no verdict, and how many runs would give one; what rows
    without a clear difference could have seen; which rows rest on the trials of a
    single run a side."""
    from hoplab.analysis.ranks import min_p as min_p_value

    sizes = sorted({(len(m.a_values), len(m.b_values)) for m in g.metrics
                    if m.verdict == "not enough data" and m.per == "run"})
    out = metric_notes(m.metric for m in g.metrics)
    single = [row_name(m) for m in g.metrics if m.per != "run" and min(m.a_runs, m.b_runs) < 2]
    if single:
        out.append(f"{', '.join(single)}: judged on every trial of one run a side, so a "
                   "difference between those two runs' conditions counts as one between A "
                   "and B; repeat each side (repeat = 3) to see the runs' own spread")
    unclear = [f"{row_name(m)} {_detectable(m.detectable_pct)}" for m in g.metrics
               if m.verdict == UNCLEAR]
    if unclear:
        out.append(f"{word(UNCLEAR)}: the smallest change these runs would have seen 80 % of "
                   f"the time (p <= {alpha:g}): {', '.join(unclear)}; a smaller one can hide "
                   "in their noise")
    need = runs_per_side(alpha)
    for na, nb in sizes:
        if min(na, nb) < 2:
            out.append(f"{na} + {nb} runs: one run shows no spread, so a difference cannot "
                       f"be told from noise; {need} runs per side can (repeat = {need} in "
                       "the experiment)")
        else:
            out.append(f"{na} + {nb} runs: the rank test cannot reach p <= {alpha:g} (its "
                       f"smallest p is {min_p_value(na, nb):.2g}); {need} runs per side can")
    return out


def _detectable(pct: float) -> str:
    if math.isnan(pct) or math.isinf(pct):
        return "(none can be said: the noise has no relative size)"
    return f"{pct:.1f} %"


def counts(result: Comparison) -> dict[str, int]:
    """How many rows of every group have each verdict (`without`: not enough data, n/a)."""
    out = {"better": 0, "worse": 0, "same": 0, "unclear": 0, "without": 0}
    for g in result.groups:
        for m in g.metrics:
            out[m.verdict if m.verdict in out else "without"] += 1
    return out


def summary(result: Comparison) -> str:
    """"B against A: 2 better, 0 worse, 1 same, 3 no clear difference, 1 without a
    verdict"."""
    n = counts(result)
    return (f"B against A: {n['better']} better, {n['worse']} worse, {n['same']} same, "
            f"{n['unclear']} {word(UNCLEAR)}, {n['without']} without a verdict")


def interval(low: float, high: float) -> str:
    """An interval of a change in %, as headlines write it: "[-49.6, -48.3]"; "" when it
    could not be computed."""
    if math.isnan(low) or math.isnan(high):
        return ""
    return f"[{round(low, 1) + 0.0:+.1f}, {round(high, 1) + 0.0:+.1f}]"


def is_headline(g: GroupComparison, m: MetricComparison) -> bool:
    """Whether the row is one of its test kind's headline figures (the kind declares
    them: goodput, the RTT under load...), of the whole run."""
    return m.flow is None and m.node is None and m.metric in HEADLINE.get(g.kind, ())


def biggest(result: Comparison) -> list[tuple[GroupComparison, MetricComparison]]:
    """Every row of every group, in the one order of changes (analysis/verdicts.py rank):
    the regressions first, then the improvements, then the rest; within each, the test
    kinds' headline figures before the others (goodput doubled before a p5 rate that
    grew tenfold from a stall), each by the size of its change."""
    def order(gm: tuple[GroupComparison, MetricComparison]) -> tuple[int, bool, float]:
        tier, size = rank(gm[1].verdict, gm[1].change_pct)
        return tier, not is_headline(*gm), size

    rows = [(g, m) for g in result.groups for m in g.metrics]
    return sorted(rows, key=order)


def change_text(g: GroupComparison | None, m: MetricComparison) -> str:
    """One change as a sentence's part: "goodput -49.0 % [-49.6, -48.3] worse", with its
    group's title when `g` is given ("goodput (wan / bulk) ...")."""
    where = f" ({g.title})" if g is not None else ""
    ci_text = interval(m.ci_low_pct, m.ci_high_pct)
    return (f"{row_name(m)}{where} {pct(m.change_pct)}{' ' + ci_text if ci_text else ''} "
            f"{verdict(m)}")


def headline(result: Comparison, a: str = "A", b: str = "B") -> str:
    """The answer in one line, first in every view of a comparison (compare's text and
    markdown, the report, the dashboard): "B against A: goodput -49.0 % [-49.6, -48.3]
    worse; 3 more worse, 2 better, 20 with no clear difference". The change it leads
    with is the largest regression, else the largest improvement; the counts are of
    every row of every group."""
    rows = biggest(result)
    n = counts(result)
    lead = rows[0] if rows and rows[0][1].verdict in (WORSE, BETTER) else None
    parts = []
    for name, key in ((WORSE, "worse"), (BETTER, "better"), (SAME, "same"),
                      (f"with {word(UNCLEAR)}", "unclear"), ("without a verdict", "without")):
        left = n[key] - (1 if lead is not None and lead[1].verdict == key else 0)
        if left:
            more = "more " if lead is not None and lead[1].verdict == key else ""
            parts.append(f"{left} {more}{name}")
    counted = ", ".join(parts)
    if lead is None:
        return f"{b} against {a}: nothing better or worse" + (f"; {counted}" if counted
                                                             else "")
    g, m = lead
    said = change_text(g if len(result.groups) > 1 else None, m)
    return f"{b} against {a}: {said}" + (f"; {counted}" if counted else "")


def legend(result: Comparison) -> str:
    """What the verdicts mean, under a comparison."""
    level = f"{100 * (1 - result.alpha):g} %"
    return (f"better/worse: Mann-Whitney p ≤ {result.alpha:g}, the bootstrap {level} CI of "
            "the change of medians excludes 0 and the change is at least 1 %; same: that CI "
            f"lies within ±{result.margin_pct:g} %; no clear difference: neither "
            "(docs/compare.md).")


def to_json(result: Comparison, explicit: bool = False) -> dict[str, Any]:
    """`groups` (each with its metrics, every field plus `label`, `name` and `unit` from
    the registry) and `unmatched`, JSON-ready."""
    groups = []
    for g in result.groups:
        data = dataclasses.asdict(g)
        data["metrics"] = [dataclasses.asdict(m) | {"label": m.label, "name": row_name(m)}
                           for m in ordered(g, explicit)]
        groups.append(data)
    out: dict[str, Any] = json_safe({"groups": groups, "unmatched": list(result.unmatched),
                                     "margin_pct": result.margin_pct})
    return out
