"""`hoplab runs` lists stored runs; `hoplab show RUN_ID` prints one of them."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any

from hoplab import metrics
from hoplab.cli import store_arg
from hoplab.jsonsafe import json_safe
from hoplab.render.headline import HEADLINE
from hoplab.render.units import figure, pairs


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("runs", help="list stored runs",
                       description="List stored runs, newest last. --filter KEY=VALUE "
                                   "matches a column (experiment, test, kind, status, "
                                   "experiment_id, id), a label or a variant value; a "
                                   "comma joins conditions that must all hold "
                                   "(version=v1,test=bulk), as does a repeated --filter. A "
                                   "key or value no run has is an error listing those "
                                   "there are.")
    store_arg.add(p)
    p.add_argument("--filter", dest="filters", action="append", default=[],
                   metavar="KEY=VALUE[,KEY=VALUE]")
    p.add_argument("--limit", type=int, help="only the last N matching runs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_list)
    s = sub.add_parser("show", help="show one stored run",
                       description="Show a stored run: metadata, figures per flow, router "
                                   "CPU, interfaces and qdiscs, and its series.")
    s.add_argument("run", metavar="RUN",
                   help="a run id, or a selection that names one run (test=bulk,hops=2)")
    store_arg.add(s)
    s.add_argument("--json", action="store_true",
                   help="the run as JSON (series as point counts unless --series)")
    s.add_argument("--series", action="store_true", help="with --json: every series point")
    s.set_defaults(func=run_show)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def run_list(args: argparse.Namespace) -> int:
    # Imported here, not at the top: rich and SQLAlchemy would slow `runs --help`.
    from rich.markup import escape
    from rich.table import Table

    from hoplab.analysis import select
    from hoplab.render.console import console as make_console

    filters = select.conditions(args.filters)
    with store_arg.reading(args) as store:
        runs = store.list_runs(filters, limit=args.limit, newest=True)
        if not runs and filters:
            select.check(store, filters)        # a typo is an error, not an empty list
        desc = store.describe()
    if args.json:
        json.dump(json_safe([dataclasses.asdict(r) for r in runs]), sys.stdout, indent=2,
                  default=str)
        sys.stdout.write("\n")
        return 0
    console = make_console()
    if not runs:
        console.print(f"no runs in {desc}" + (" match" if args.filters else ""), markup=False)
        return 0
    # Every cell is text from the runs (names, labels): shown as it is, never read as markup.
    table = Table(title=escape(f"runs in {desc}"), title_justify="left")
    for col in ("id", "started", "experiment", "test", "variant", "labels", "rep", "status",
                "figures"):
        table.add_column(col, justify="right" if col in ("id", "rep") else "left")
    for r in runs:
        # Every headline figure: rrul's loaded RTT and added latency are its point.
        names = HEADLINE.get(r.kind, ())
        figures = ", ".join(f"{metrics.label(n)} {figure(r.metrics[n], n)}"
                            for n in names if n in r.metrics)
        variant = pairs(r.variant)
        status = escape(r.status) if r.status == "ok" else f"[red]{escape(r.status)}[/]"
        table.add_row(str(r.id), _when(r.started_at), escape(r.experiment), escape(r.test),
                      escape(variant), escape(pairs(r.labels)), str(r.repetition), status,
                      escape(figures))
    console.print(table)
    return 0


def _as_json(rec: Any, with_points: bool) -> dict[str, Any]:
    data = dataclasses.asdict(rec)
    data.pop("raw", None)
    if not with_points:
        data["series"] = [{k: v for k, v in s.items() if k not in ("t", "v")} | {"n": len(s["t"])}
                          for s in data["series"]]
    data["raw_outputs"] = [{"name": r.name, "size": len(r.data), "media_type": r.media_type}
                           for r in rec.raw]
    return data


def run_show(args: argparse.Namespace) -> int:
    from hoplab.analysis.select import select_one
    from hoplab.render.console import console as make_console
    from hoplab.render.run_view import run_view

    with store_arg.reading(args) as store:
        rec = store.get_run(select_one(store, args.run), series=True, raw=True)
        desc = store.describe()
    if args.json:
        json.dump(json_safe(_as_json(rec, args.series)), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    make_console().print(run_view(rec, desc))
    return 0
