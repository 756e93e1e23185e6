"""`hoplab compare --format markdown`: the comparison as GitHub-flavoured markdown, for a
pull request or a chat. The first line is the headline (render/comparison.py headline,
the same sentence every view leads with), then one table per group with its notes.
Rendering only: analysis.groups.compare_groups decided every row."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hoplab.render import comparison as view
from hoplab.render.units import figure

if TYPE_CHECKING:
    from hoplab.analysis.groups import Comparison

# What markdown (and GitHub's HTML in it) reads as markup inside a line. Labels, test
# names and selections are the user's: a `|` would split a table cell, `<b>` would be a
# tag, `[x](y)` a link. Brackets and `<` alone are left as they are, to stay readable.
_MARKUP = re.compile(r"[\\`*_|~]|<(?=[A-Za-z/!?])|\](?=[(\[])")


def md(text: str) -> str:
    """`text` with every character escaped that markdown reads as markup inside a line,
    so that it reads as typed."""
    return _MARKUP.sub(lambda m: "\\" + m.group(0), text).replace("\n", " ")


def _first(text: str) -> str:
    """md for the start of a line, where #, -, + and = would make a heading or a list."""
    return "\\" + md(text) if text[:1] in ("#", "-", "+", "=") else md(text)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def comparison_markdown(result: Comparison, *, a: str, b: str, ids_a: Sequence[int],
                        ids_b: Sequence[int], store: str, explicit: bool = False) -> str:
    """The whole comparison: headline, sides, then each group's table, warnings and
    notes, then what was not compared."""
    level = f"{100 * (1 - result.alpha):g} % CI"
    lines = [_first(view.headline(result, a, b)), "",
             f"A {md(a)}: {md(view.runs(list(ids_a)))}  ",
             f"B {md(b)}: {md(view.runs(list(ids_b)))}  ",
             f"in {md(store)}; verdict at alpha {result.alpha:g}, same within "
             f"±{result.margin_pct:g} %"]
    for g in result.groups:
        a_name, b_name = g.a_label or a, g.b_label or b
        lines += ["", f"**{md(g.title)}**: A {md(a_name)}: {md(view.runs(g.a_ids))} against "
                      f"B {md(b_name)}: {md(view.runs(g.b_ids))}", "",
                  _row(("metric", "n", "A median", "B median", "change", level, "p",
                        "verdict")),
                  "|:--|--:|--:|--:|--:|--:|--:|:--|"]
        for m in view.ordered(g, explicit):
            word = md(view.verdict(m))
            lines.append(_row((
                md(view.row_name(m)), md(view.sizes(m)),
                md(figure(m.a_median, m.metric, m.unit)),
                md(figure(m.b_median, m.metric, m.unit)), md(view.pct(m.change_pct)),
                md(view.ci(m)), "-" if m.p_value is None else f"{m.p_value:.2g}",
                f"**{word}**" if m.verdict in ("better", "worse") else word)))
        extra = [f"warning: {md(w)}" for w in g.warnings]
        extra += [f"note: {md(n)}" for n in view.notes(g, result.alpha)]
        if extra:
            lines += [""] + [f"- {x}" for x in extra]
    if result.unmatched:
        lines += [""] + [f"- not compared: {md(u)}" for u in result.unmatched]
    lines += ["", md(view.legend(result))]
    return "\n".join(lines) + "\n"
