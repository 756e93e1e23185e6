"""`hoplab flamegraph`, `hoplab profile` and `hoplab fold`: a run's CPU profile."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hoplab import kv
from hoplab.cli import store_arg
from hoplab.errors import HoplabError, UsageError

if TYPE_CHECKING:
    from hoplab.record import RunRecord

# The profile, store and rich modules are imported in the functions that use them:
# at the top they would slow `--help` of these three commands.


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    f = sub.add_parser("flamegraph", help="draw a run's flame graph (or a diff of two)",
                       description="An interactive SVG flame graph of a run's profile (or of a "
                                   "selection's runs, pooled): hover for counts, click to zoom, "
                                   "Ctrl-F to search; drawn root on top. With --diff A B: each "
                                   "frame of B red where its share of the samples (with all it "
                                   "calls) grew from A, blue where it shrank, the largest change"
                                   " the strongest. A and B are runs or selections (12-15, "
                                   "version=v2,test=bulk); a side of several profiled runs draws"
                                   " their samples pooled.")
    f.add_argument("runs", nargs="+", metavar="RUN",
                   help="a run or a selection (its profiled runs pooled in one graph); "
                        "with --diff, two runs or selections")
    f.add_argument("-o", "--output", help="SVG file (default: hoplab-RUN-flamegraph.svg)")
    shape = f.add_mutually_exclusive_group()
    shape.add_argument("--icicle", action="store_false", dest="upright",
                       help="root on top, callees below (the default)")
    shape.add_argument("--upright", action="store_true",
                       help="root at the bottom, callees above; frames thinned so that the "
                            "root stays within an 800 px high window")
    f.add_argument("--diff", action="store_true",
                   help="a differential graph of two runs or selections: A B")
    f.add_argument("--node", help="only the processes of this node")
    store_arg.add(f)
    f.set_defaults(func=run_flamegraph)
    p = sub.add_parser("profile", help="a run's top symbols and time by category (or a diff "
                                       "of two sides)",
                       description="A run's top symbols by self time and its time by "
                                   "category. With --diff A B: the top symbols of two runs "
                                   "or two selections of profiled runs side by side, the "
                                   "change in points, and (several profiles a side) which "
                                   "changes are beyond noise.")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="a run (an id, or a selection that names one); with --diff, two "
                        "runs or selections (12,14 or 12-15 or version=v2,test=bulk)")
    p.add_argument("--diff", action="store_true", help="compare two runs or selections: A B")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--node", help="only the processes of this node")
    p.add_argument("--categories", help="a category table (TOML) instead of hoplab's")
    p.add_argument("--json", action="store_true")
    store_arg.add(p)
    p.set_defaults(func=run_profile)
    c = sub.add_parser("fold", help="perf script output -> folded stacks on stdout",
                       description="Fold `perf script` output (a file, or standard input) "
                                   "into stacks, byte for byte as FlameGraph's "
                                   "stackcollapse-perf.pl does.")
    c.add_argument("file", nargs="?", help="perf script output (default: standard input)")
    for opt, what in (("pid", "include the PID with process names"),
                      ("tid", "include the PID and TID with process names"),
                      ("kernel", "annotate kernel functions with _[k]"),
                      ("jit", "annotate JIT functions with _[j]"),
                      ("all", "all annotations (--kernel --jit)"),
                      ("addrs", "raw addresses where symbols cannot be found")):
        c.add_argument(f"--{opt}", action="store_true", help=what)
    c.add_argument("--event-filter", metavar="EVENT",
                   help="fold samples of this event only (default: the first event seen)")
    c.set_defaults(func=run_fold)


def _title(rec: RunRecord) -> str:
    return f"run {rec.id}: {rec.experiment} {rec.test} {kv.pairs(rec.variant, '')}".strip()


def run_flamegraph(args: argparse.Namespace) -> int:
    if args.diff and len(args.runs) != 2:
        raise UsageError("--diff needs exactly two runs or selections: A B")
    if not args.diff and len(args.runs) != 1:
        raise UsageError("give one run, or --diff A B")
    if args.diff:
        svg, name = _flame_diff(args)
    else:
        svg, name = _flame_one(args)
    out = Path(args.output or f"hoplab-{name}-{'diff' if args.diff else 'flamegraph'}.svg")
    out.write_text(svg)
    print(out)
    return 0


def _flame_one(args: argparse.Namespace) -> tuple[str, str]:
    """A run's graph, or a selection's profiled runs' samples pooled in one graph (what
    `hoplab run`'s report draws for each variant); its name for the default file."""
    from collections import Counter

    from hoplab.analysis.select import select
    from hoplab.profile import analyze, fold
    from hoplab.profile.flamegraph import flamegraph
    from hoplab.profile.stored import run_stacks, side_stacks

    spec = args.runs[0]
    with store_arg.reading(args) as store:
        ids = select(store, spec)
        if len(ids) == 1:
            rec, stacks = run_stacks(store, ids[0], args.node)
            prof = rec.metadata["profile"]
            return flamegraph(
                fold.render(stacks), title=_title(rec), upright=args.upright,
                subtitle=f"{analyze.samples(stacks)} samples at {prof['frequency']} Hz "
                         f"during {prof['phase']}; {prof['attribution']}"), str(rec.id)
        runs, each, skipped = side_stacks(store, spec, ids, args.node)
        records = [store.get_run(i, series=False) for i in runs]
    pooled = sum(each, Counter[str]())
    left_out = f"; runs {_ids(skipped)} have no profile" if skipped else ""
    svg = flamegraph(fold.render(pooled), title=_pooled_title(spec, records),
                     upright=args.upright,
                     subtitle=f"{analyze.samples(pooled)} samples, {len(runs)} runs pooled"
                              f"{left_out}")
    return svg, re.sub(r"[^\w.+-]+", "_", spec)[:80]


def _pooled_title(spec: str, records: list[RunRecord]) -> str:
    """What the pooled runs share (experiment, test, variant), else the selection."""
    shared = {(r.experiment, r.test, kv.pairs(r.variant, "")) for r in records}
    what = " ".join(shared.pop()).strip() if len(shared) == 1 else spec
    return f"{what} (runs {_ids([r.id for r in records if r.id is not None])})"


def _flame_diff(args: argparse.Namespace) -> tuple[str, str]:
    """The differential graph of the two sides (a side of several runs: their samples
    pooled) and the name of its default file."""
    from collections import Counter

    from hoplab.analysis.select import select_pair
    from hoplab.profile import fold
    from hoplab.profile.flamegraph import diff
    from hoplab.profile.stored import side_stacks

    with store_arg.reading(args) as store:
        ids = select_pair(store, args.runs[0], args.runs[1])
        sides = [side_stacks(store, spec, side, args.node)
                 for spec, side in zip(args.runs, ids, strict=True)]
        first = store.get_run(sides[0][0][0], series=False)
    pooled = [sum(stacks, Counter[str]()) for _, stacks, _ in sides]
    if all(len(runs) == 1 for runs, _, _ in sides):
        title = f"{_title(first)} -> run {sides[1][0][0]}"
    else:
        title = " -> ".join(f"{spec} (run{'s' * (len(runs) != 1)} {_ids(runs)})"
                            for spec, (runs, _, _) in zip(args.runs, sides, strict=True))
    svg = diff(fold.render(pooled[0]), fold.render(pooled[1]), title=title,
               upright=args.upright)
    name = "-".join(str(runs[0]) if len(runs) == 1 else re.sub(r"[^\w.-]+", "_", spec)
                    for spec, (runs, _, _) in zip(args.runs, sides, strict=True))
    return svg, name


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:10])) + (f" and {len(ids) - 10} more" if len(ids) > 10
                                             else "")


def run_profile(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UsageError("--top must be 1 or more")
    if args.diff:
        if len(args.runs) != 2:
            raise UsageError("--diff needs exactly two runs or selections: A B")
        if args.categories:
            raise UsageError("--categories does not apply to --diff")
        from hoplab.cli.profile_diff import run_diff

        return run_diff(args)
    if len(args.runs) != 1:
        raise UsageError("give one run id, or --diff A B")
    from rich.markup import escape
    from rich.table import Table

    from hoplab.analysis.select import select_one
    from hoplab.profile import analyze
    from hoplab.profile.stored import run_stacks
    from hoplab.render.console import console

    with store_arg.reading(args) as store:
        rec, stacks = run_stacks(store, select_one(store, args.runs[0]), args.node)
    table = analyze.load_categories(Path(args.categories)) if args.categories \
        else analyze.load_categories()
    top = analyze.top_symbols(stacks, args.top)
    cats = analyze.categories(stacks, table)
    prof = rec.metadata["profile"]
    if args.json:
        data: dict[str, Any] = {"run": rec.id, "samples": analyze.samples(stacks),
                                "frequency": prof["frequency"], "phase": prof["phase"],
                                "attribution": prof["attribution"], "node": args.node,
                                "top": [{"symbol": s, "percent": p} for s, p in top],
                                "categories": cats}
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    out = console()
    if args.node and not analyze.samples(stacks):
        out.print(f"no process of node {args.node} ran during run {rec.id}'s profile: a "
                  f"router's forwarding is kernel work in softirq, counted host-wide; see "
                  f"hoplab profile {rec.id} without --node", markup=False)
        return 0
    # The run's names are shown as they are, never read as rich markup.
    out.print(f"{_title(rec)}: {analyze.samples(stacks)} samples at {prof['frequency']} Hz "
              f"during {prof['phase']}" + (f", processes of {args.node}" if args.node else
                                           f" ({prof['attribution']})"), markup=False)
    t = Table(title=f"top {args.top} symbols by self time", title_justify="left")
    t.add_column("self", justify="right")
    t.add_column("symbol")
    for sym, pct in top:
        t.add_row(f"{pct:5.2f} %", escape(sym))
    c = Table(title="time by category", title_justify="left")
    c.add_column("category")
    c.add_column("share", justify="right")
    for name, pct in cats.items():
        c.add_row(escape(name), f"{pct:5.1f} %")
    out.print(t)
    out.print(c)
    return 0


def run_fold(args: argparse.Namespace) -> int:
    import subprocess

    from hoplab.profile import fold

    opts = [o for o in fold.OPTIONS if getattr(args, o)]
    argv = fold.argv(opts, args.event_filter)
    if args.file is not None:
        path = Path(args.file)
        if not path.is_file():
            raise UsageError(f"cannot read {args.file}: no such file")
        if path.stat().st_size == 0:
            raise UsageError(f"{args.file} is empty: no perf script output to fold")
        argv.append(str(path))
    # The folder streams the input and writes to our standard output itself: nothing
    # passes through Python, so memory holds the distinct stacks, not the input.
    sys.stdout.flush()
    done = subprocess.run(argv, check=False)
    if done.returncode != 0:
        raise HoplabError(f"hoplab-fold failed (exit {done.returncode})")
    return 0
