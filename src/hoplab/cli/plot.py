"""`hoplab plot RUN... --kind KIND`: a figure of stored runs as PNG, SVG or PDF."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hoplab.cli import store_arg
from hoplab.errors import UsageError
from hoplab.render.plot_kinds import FORMATS, KINDS, SINGLE_RUN

if TYPE_CHECKING:
    from hoplab.record import RunRecord
    from hoplab.store import Store


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "plot", help="draw stored runs (PNG, SVG, PDF)",
        description="Draw stored runs. RUN is a run id, a list or range (12,14 or "
                    "12-15), or KEY=VALUE conditions, a comma joining those that must all "
                    "hold (version=v1,test=bulk), as `hoplab compare` and `hoplab report` "
                    "take them; several RUNs add their runs together. "
                    "Kinds: timeseries (throughput per flow and in total, RTT below, "
                    "phases), cdf (RTT of several runs), box and bars (a metric per "
                    "variant over repetitions), ping (ping streams over time), cpu (per-core "
                    "CPU stacked by user, system, irq, softirq), timeline (one flow's "
                    "throughput through several runs end to end, in the order given: "
                    "--flow NAME), tcpinfo (each TCP flow's cwnd, smoothed RTT and "
                    "delivery rate over time, from the tcp_info sampler). Legends quote "
                    "the runs' stored figures, as `hoplab show` "
                    "prints them, for the phase they belong to (rrul: idle and loaded RTT; "
                    "its CDF one curve per phase). With --overlay, each RUN is a group "
                    "(one run or several) and the groups' total throughput and RTT over "
                    "time are drawn on shared axes, one colour a group, captioned by the "
                    "labels that set it apart (as Flent's multi-run plots).")
    p.add_argument("runs", nargs="+", metavar="RUN")
    p.add_argument("--kind", choices=KINDS,
                   help="what to draw (required unless --overlay, which draws time series)")
    p.add_argument("--overlay", action="store_true",
                   help="each RUN a group: their throughput and RTT over time on shared "
                        "axes (up to 8 groups)")
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
    from hoplab.analysis.select import select_many

    return [store.get_run(i, series=series) for i in select_many(store, items)]


def _check_metric(kind: str, metric: str | None, runs: list[RunRecord]) -> None:
    """A --metric no selected run has is refused, listing the names they have."""
    if metric is None or kind not in ("box", "bars", "cdf"):
        return
    if kind == "cdf":
        have = sorted({s.name for r in runs for s in r.series})
        if metric not in have:
            raise UsageError(f"--metric {metric!r}: with --kind cdf it names a series, and "
                             f"no selected run has this one; they have "
                             f"{', '.join(have) or 'none'}")
        return
    from hoplab import metrics

    metrics.require(metric, {m.name for r in runs for m in r.metrics
                             if m.flow is None and m.node is None and m.key is None},
                    "--metric")


def _default_name(runs: list[RunRecord], kind: str) -> Path:
    ids = [str(r.id) for r in runs]
    shown = "-".join(ids[:4]) + (f"-and-{len(ids) - 4}-more" if len(ids) > 4 else "")
    return Path(f"hoplab-{shown}-{kind}.png")


def _overlay(args: argparse.Namespace) -> int:
    from hoplab.analysis.select import select
    from hoplab.render.console import console as make_console

    if args.kind not in (None, "timeseries"):
        raise UsageError(f"--overlay draws time series; --kind {args.kind} draws runs "
                         "together already (drop --overlay)")
    with store_arg.reading(args) as store:
        chosen = [(spec, [store.get_run(i) for i in select(store, spec)])
                  for spec in args.runs]
    from hoplab.render.overlay import groups_of
    from hoplab.render.plots import save
    from hoplab.render.plots_overlay import overlay

    title, groups = groups_of(chosen)
    fig = overlay(title, groups)
    runs = [r for _, rs in chosen for r in rs]
    path = save(fig, args.output or _default_name(runs, "overlay"))
    make_console().print(str(path), highlight=False, soft_wrap=True, markup=False)
    return 0


def run_plot(args: argparse.Namespace) -> int:
    if args.output is not None and args.output.suffix.lower() not in FORMATS:
        # Before any drawing: a typo in the name should not cost a long render.
        raise UsageError(f"{args.output}: the file must end in {', '.join(FORMATS)}")
    # Imported here, not at the top: rich and SQLAlchemy would slow `plot --help`.
    from hoplab.render.console import console as make_console

    if args.overlay:
        return _overlay(args)
    if args.kind is None:
        raise UsageError("give --kind KIND (or --overlay)")

    needs_series = args.kind in SINGLE_RUN or args.kind in ("cdf", "timeline")
    with store_arg.reading(args) as store:
        runs = _resolve(store, args.runs, needs_series)
    _check_metric(args.kind, args.metric, runs)
    from hoplab.render.plots import figure, save  # matplotlib: only when plotting

    fig = figure(args.kind, runs, metric=args.metric, style=args.style,
                 flow=getattr(args, "flow", None))
    path = save(fig, args.output or _default_name(runs, args.kind))
    make_console().print(str(path), highlight=False, soft_wrap=True, markup=False)
    return 0
