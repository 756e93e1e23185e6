"""`hoplab export RUN`: one stored run as JSON or as CSV tables."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

from hoplab import export
from hoplab.cli import store_arg
from hoplab.errors import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export", help="write one run as JSON or CSV",
        description="Write a stored run for other tools (docs/data-format.md). json: the "
                    "whole run, every series point, raw outputs base64-encoded; to stdout "
                    "unless -o. csv: two tables, BASE-series.csv (one row per series point) "
                    "and BASE-metrics.csv; BASE is -o without .csv, else hoplab-RUN.")
    p.add_argument("run", metavar="RUN",
                   help="a run id, or a selection that names one run (test=bulk,hops=2)")
    store_arg.add(p)
    p.add_argument("--format", choices=("json", "csv"), default="json")
    p.add_argument("-o", "--output", type=Path, metavar="FILE")
    p.set_defaults(func=run_export)


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def run_export(args: argparse.Namespace) -> int:
    # Imported here, not at the top: rich and SQLAlchemy would slow `export --help`.
    from hoplab.analysis.select import select_one
    from hoplab.render.console import console as make_console

    with store_arg.reading(args) as store:
        run = store.get_run(select_one(store, args.run), series=True,
                            raw=args.format == "json")
    if args.format == "json":
        text = json.dumps(export.to_json(run), indent=1, allow_nan=False) + "\n"
        if args.output is None:
            sys.stdout.write(text)
            return 0
        _write(args.output, text)
        make_console(stderr=True).print(f"wrote {args.output}", markup=False)
        return 0
    base = args.output or Path(f"hoplab-{run.id}")
    base = base.with_name(base.name.removesuffix(".csv"))
    for suffix, writer in (("series", export.write_series_csv),
                           ("metrics", export.write_metrics_csv)):
        buf = io.StringIO()
        rows = writer(run, buf)
        path = base.with_name(f"{base.name}-{suffix}.csv")
        _write(path, buf.getvalue())
        make_console().print(f"wrote {path} ({rows} rows)", markup=False)
    return 0
