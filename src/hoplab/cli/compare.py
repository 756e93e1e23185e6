"""`hoplab compare A B`: two sets of runs, metric by metric, with a verdict."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from hoplab import kinds
from hoplab import metrics as registry
from hoplab.analysis.verdicts import VERDICTS, word
from hoplab.cli import store_arg
from hoplab.errors import UsageError
from hoplab.render import comparison as view
from hoplab.render.compare_markdown import comparison_markdown
from hoplab.render.units import figure

if TYPE_CHECKING:
    from hoplab.analysis.groups import Comparison

_COLOURS = {"better": "green", "worse": "red", "same": "", "unclear": "",
            "not enough data": "yellow", "n/a": "dim"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare", help="compare two sets of runs, with a verdict per metric",
        description="Compare runs A (the baseline) with runs B, test by test: medians, "
                    "change, bootstrap CI, Mann-Whitney p and a verdict per metric. A and B "
                    "are run ids (12, 12,14, 12-15) or selections (qos=on, "
                    "test=bulk,version=v2). See docs/compare.md.")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    store_arg.add(p)
    p.add_argument("--metric", dest="metrics", action="append", default=[],
                   metavar="NAME", help="only this metric (repeatable); NAME@FLOW for one "
                                        "flow, NAME@node=N,key=K for a node's figure")
    p.add_argument("--per-flow", action="store_true", default=None,
                   help="also every per-flow metric (custom tests always have them)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level; the CI is at 1 - alpha (default 0.05)")
    p.add_argument("--margin", type=float, default=2.0, metavar="PCT",
                   help="'same' only when the whole CI of the change lies within +-PCT %% "
                        "(default 2); otherwise no clear difference")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--format", choices=("text", "markdown", "json"), default=None,
                   help="text (the default: the headline, then a table per group), "
                        "markdown (the same as GitHub-flavoured markdown, for a pull request "
                        "or a chat) or json")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--fail-on", metavar="VERDICT", default=None,
                   help="exit 3 when any row has this verdict (worse; several as "
                        "worse,unclear), after printing: a CI gate. 1 and 2 stay errors")
    p.set_defaults(func=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, not {args.alpha}")
    if not args.margin >= 0:
        raise UsageError(f"--margin must be 0 or more (a percentage), not {args.margin}")
    if args.resamples < 100:
        raise UsageError(f"--resamples {args.resamples}: a CI needs at least 100")
    fmt = _format(args)
    fail_on = _fail_on(args.fail_on)
    # Imported here, not at the top: numpy, scipy and SQLAlchemy take a second to import,
    # which `hoplab compare --help` should not pay.
    from hoplab.analysis.groups import compare_groups
    from hoplab.analysis.select import select_pair

    with store_arg.reading(args) as store:
        ids_a, ids_b = select_pair(store, args.a, args.b)
        # Only the series of trials (page loads), which some medians are judged on.
        trials = registry.trial_series()
        runs_a = [store.get_run(i, series=trials) for i in ids_a]
        runs_b = [store.get_run(i, series=trials) for i in ids_b]
        desc = store.describe()
    # Without --per-flow, custom tests still compare each flow (their flows differ).
    result = compare_groups(runs_a, runs_b, args.metrics or None,
                            per_flow=True if args.per_flow else kinds.per_flow,
                            seed=args.seed, resamples=args.resamples, alpha=args.alpha,
                            margin_pct=args.margin)
    if fmt == "json":
        json.dump(_as_json(args, desc, ids_a, ids_b, result), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif fmt == "markdown":
        sys.stdout.write(comparison_markdown(result, a=args.a, b=args.b, ids_a=ids_a,
                                             ids_b=ids_b, store=desc,
                                             explicit=bool(args.metrics)))
    else:
        _print(args, desc, ids_a, ids_b, result)
    failed = any(m.verdict in fail_on for g in result.groups for m in g.metrics)
    return FAILED if failed else 0


FAILED = 3                  # --fail-on: a verdict asked to fail on was found


def _format(args: argparse.Namespace) -> str:
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format}: give one")
    return "json" if args.json else args.format or "text"


def _fail_on(text: str | None) -> set[str]:
    """The verdicts --fail-on names (worse, better, same, unclear or "no clear
    difference", "not enough data", n/a), comma-separated."""
    if text is None:
        return set()
    known = {v: v for v in VERDICTS} | {word(v): v for v in VERDICTS}
    out = set()
    for item in (x.strip() for x in text.split(",")):
        if item not in known:
            raise UsageError(f"--fail-on {item!r}: not a verdict; use one of "
                             f"{', '.join(VERDICTS)} (comma-separated for several)")
        out.add(known[item])
    return out


def _as_json(args: argparse.Namespace, desc: str, ids_a: list[int], ids_b: list[int],
             result: Comparison) -> dict[str, Any]:
    return {"store": desc, "a": {"spec": args.a, "runs": ids_a},
            "b": {"spec": args.b, "runs": ids_b}, "alpha": args.alpha, "seed": args.seed,
            "resamples": args.resamples, "headline": view.headline(result, args.a, args.b),
            **view.to_json(result, bool(args.metrics))}


def _print(args: argparse.Namespace, desc: str, ids_a: list[int], ids_b: list[int],
           result: Comparison) -> None:
    from rich.markup import escape
    from rich.table import Table

    from hoplab.render.console import console as make_console

    # Selections, names and warnings carry text from the runs and the command line:
    # shown as they are, never read as rich markup.
    console = make_console()
    level = f"{100 * (1 - args.alpha):g} % CI"
    console.print(view.headline(result, args.a, args.b), markup=False, highlight=False,
                  soft_wrap=True)
    console.print(f"[bold]A[/] {escape(args.a)}: {view.runs(ids_a)}\n"
                  f"[bold]B[/] {escape(args.b)}: {view.runs(ids_b)}"
                  f"\nin {escape(desc)}; verdict at alpha {args.alpha:g}, same within "
                  f"+-{args.margin:g} % (see docs/compare.md)")
    for g in result.groups:
        a_name, b_name = g.a_label or args.a, g.b_label or args.b
        table = Table()
        for col in ("metric", "n", "A median", "B median", "change", level, "p", "verdict"):
            table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
        for m in view.ordered(g, bool(args.metrics)):
            colour = _COLOURS[m.verdict]
            table.add_row(
                *map(escape, (view.row_name(m), view.sizes(m),
                              figure(m.a_median, m.metric, m.unit),
                              figure(m.b_median, m.metric, m.unit),
                              view.pct(m.change_pct), view.ci(m),
                              "-" if m.p_value is None else f"{m.p_value:.2g}")),
                f"[{colour}]{escape(view.verdict(m))}[/]" if colour
                else escape(view.verdict(m)))
        console.print(f"\n[bold]{escape(g.title)}[/]  "
                      + escape(f"A {a_name}: {view.runs(g.a_ids)}  vs  "
                               f"B {b_name}: {view.runs(g.b_ids)}"))
        console.print(table)
        for w in g.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}")
        for n in view.notes(g, args.alpha):
            console.print(f"[dim]note:[/] {escape(n)}")
    if result.unmatched:
        console.print()
        for u in result.unmatched:
            console.print(f"[dim]not compared:[/] {escape(u)}")
