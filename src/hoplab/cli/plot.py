"""`hoplab plot RUN... --kind KIND`: a figure of stored runs as PNG, SVG or PDF."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hoplab import kv, numbers
from hoplab.cli import store_arg
from hoplab.errors import UsageError
from hoplab.render.plot_kinds import FORMATS, KINDS, SINGLE_RUN

if TYPE_CHECKING:
    from hoplab.record import RunRecord
    from hoplab.store import Store


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plot", help="draw stored runs (PNG, SVG, PDF)",
        description="Draw stored runs. RUN is a run id, or KEY=VALUE to take every run "
                    "matching it (as `hoplab runs --filter`; several KEY=VALUE all apply). "
                    "Kinds: timeseries (throughput per flow and in total, RTT below, "
                    "phases), cdf (RTT of several runs), box and bars (a metric per "
                    "variant over repetitions), ping (ping streams over time), cpu (per-core "
                    "CPU stacked by user, system, irq, softirq), timeline (one flow's "
                    "throughput through several runs end to end, in the order given: "
                    "--flow NAME). Legends quote the runs' stored figures, as `hoplab show` "
                    "prints them, for the phase they belong to (rrul: idle and loaded RTT; "
                    "its CDF one curve per phase).")
    p.add_argument("runs", nargs="+", metavar="RUN")
    p.add_argument("--kind", required=True, choices=KINDS)
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="FILE.png, .svg or .pdf (default: hoplab-RUN-KIND.png here)")
    p.add_argument("--metric", help="box, bars: the whole-run metric (default: the test "
                                    "kind's first headline figure, e.g. goodput); cdf: the "
                                    "series (default rtt)")
    p.add_argument("--style", choices=("lines", "points"), default="lines",
                   help="ping: draw streams as lines or as points")
    p.add_argument("--flow", help="timeline: the flow to follow (a multi-stream flow's "
                                  "streams are summed)")
    store_arg.add(p)
    p.set_defaults(func=run_plot)


def _resolve(store: Store, items: list[str], series: bool) -> list[RunRecord]:
    ids: list[int] = []
    filters = kv.parse([i for i in items if "=" in i], "RUN", "hops=2 (or a run id, 7)")
    for item in items:
        if "=" in item:
            continue
        ids.append(numbers.run_id(item, "RUN (a run id or KEY=VALUE, e.g. 7 or hops=2)"))
    if filters:
        found = [r.id for r in store.list_runs(filters)]
        if not found:
            shown = " ".join(f"{k}={v}" for k, v in filters.items())
            raise UsageError(f"no run in {store.describe()} matches {shown}")
        ids += [i for i in found if i not in ids]
    return [store.get_run(i, series=series) for i in ids]


def _default_name(runs: list[RunRecord], kind: str) -> Path:
    ids = [str(r.id) for r in runs]
    shown = "-".join(ids[:4]) + (f"-and-{len(ids) - 4}-more" if len(ids) > 4 else "")
    return Path(f"hoplab-{shown}-{kind}.png")


def run_plot(args: argparse.Namespace) -> int:
    if args.output is not None and args.output.suffix.lower() not in FORMATS:
        # Before any drawing: a typo in the name should not cost a long render.
        raise UsageError(f"{args.output}: the file must end in {', '.join(FORMATS)}")
    # Imported here, not at the top: rich and SQLAlchemy would slow `plot --help`.
    from hoplab.render.console import console as make_console

    needs_series = args.kind in SINGLE_RUN or args.kind in ("cdf", "timeline")
    with store_arg.reading(args) as store:
        runs = _resolve(store, args.runs, needs_series)
    from hoplab.render.plots import figure, save  # matplotlib: only when plotting

    fig = figure(args.kind, runs, metric=args.metric, style=args.style,
                 flow=getattr(args, "flow", None))
    path = save(fig, args.output or _default_name(runs, args.kind))
    make_console().print(str(path), highlight=False, soft_wrap=True, markup=False)
    return 0
