"""`hoplab import FILE...`: iperf3 -J outputs, Flent data files and hoplab exports as runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hoplab import kv, metrics
from hoplab.cli import store_arg
from hoplab.kinds import HEADLINES
from hoplab.render.headline import HEADLINE
from hoplab.render.units import figure

if TYPE_CHECKING:
    from hoplab.record import RunRecord


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "import", help="load iperf3 JSON outputs and Flent data files as runs",
        description="Load measurements made elsewhere into the store: iperf3 -J outputs "
                    "(TCP, UDP, -P, -R, --bidir; an output that ends in an error becomes a "
                    "failed run), Flent data files (.flent.gz) and `hoplab export --format "
                    "json` files. Every file is checked before anything is saved: one bad "
                    "file and nothing is imported (exit 2).")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    store_arg.add(p)
    p.add_argument("--experiment", help="the runs' experiment name (default: imported)")
    p.add_argument("--test", help="the runs' test name (default: the iperf3 file's stem, or "
                                  "the Flent test's NAME)")
    p.add_argument("--label", dest="labels", action="append", default=[], metavar="KEY=VALUE",
                   help="a label for every imported run, e.g. --label device=rpi4 (repeatable)")
    p.set_defaults(func=run_import)


def _labels(items: list[str]) -> dict[str, str]:
    return kv.parse(items, "--label", "--label device=rpi4")


def run_import(args: argparse.Namespace) -> int:
    # Imported here, not at the top: rich and SQLAlchemy would slow `import --help`.
    from rich.markup import escape

    from hoplab.analysis.changes import keep_judged
    from hoplab.importers import Options, load_files
    from hoplab.render.console import console as make_console

    options = Options(experiment=args.experiment, test=args.test, labels=_labels(args.labels))
    # Every file is read and checked (that the store can hold its run too) before the
    # store is opened; then all are saved in one transaction: one bad file, none is in.
    runs = load_files(args.files, options)
    console = make_console()
    with store_arg.writing(args) as store:
        store.save_runs(runs)
        keep_judged(store, HEADLINES, [r.id for r in runs if r.id is not None])
        desc = store.describe()
    for path, run in zip(args.files, runs, strict=True):
        figures = ", ".join(f"{metrics.label(n)} {figure(v, n, u)}"
                            for n in HEADLINE.get(run.kind, ())[:3]
                            for v, u in [_metric(run, n)] if u)
        # The file's name and everything read from it (an error is the tool's stderr)
        # are shown as they are, never read as rich markup.
        status = "" if run.status == "ok" else \
            f" [red]{escape(run.status)}[/]: {escape(str(run.error))}"
        console.print(escape(f"run {run.id}: {path} -> {run.experiment}/{run.test} "
                             f"({run.kind}, {len(run.series)} series)") + status
                      + escape(f"; {figures}" if figures else ""))
    console.print(escape(f"imported {len(runs)} run(s) into {desc}"))
    return 0


def _metric(run: RunRecord, name: str) -> tuple[float, str]:
    """The whole-run metric `name` and its unit; unit "" when the run has none."""
    for m in run.metrics:
        if (m.name, m.flow, m.node, m.key) == (name, None, None, None):
            return m.value, m.unit
    return 0.0, ""
