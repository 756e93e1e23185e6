"""`hoplab report RUN... -o report.html`: stored runs as one self-contained HTML file."""

from __future__ import annotations

import argparse
import os
import time

from hoplab.cli import store_arg
from hoplab.errors import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report", help="write stored runs as one self-contained HTML file",
        description="Write an HTML report of stored runs that opens without network access: "
                    "charts per run (throughput and latency over time with the phases, CPU "
                    "per core, RTT distribution), the metadata, the figures, and with "
                    "several runs a comparison (when they split into two groups by variant "
                    "or labels) or a table of headline figures.")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run ids (12, 12,14, 12-15) or selections (qos=on, "
                        "experiment=x,test=bulk: a comma joins conditions that must all "
                        "hold); several add their runs together")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file")
    store_arg.add(p)
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from hoplab.analysis.changes import pinned_changes
    from hoplab.analysis.select import select_many
    from hoplab.kinds import HEADLINES
    from hoplab.record import RawOutput
    from hoplab.render.console import console as make_console
    from hoplab.render.profile_html import FOLDED
    from hoplab.render.report import build_report, summary_of

    start = time.monotonic()
    with store_arg.reading(args) as store:
        runs = []
        for i in select_many(store, args.runs):
            rec = store.get_run(i)
            # Of the raw outputs, the report needs only a profile's folded stacks.
            prof = rec.metadata.get("profile")
            if isinstance(prof, dict) and prof.get("status") == "ok":
                rec.raw = [RawOutput(FOLDED, store.raw_output(i, FOLDED))]
            runs.append(rec)
        desc = store.describe()
        notes = store.annotations()         # drawn on the trend charts they fall on
        # Series with a pinned baseline: their latest runs judged against it.
        pinned = pinned_changes(store, [summary_of(r) for r in runs], HEADLINES) \
            if len(runs) > 1 else []
    text = build_report(runs, desc, notes=notes, pinned=pinned)
    tmp = f"{args.output}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, args.output)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    make_console().print(f"wrote {args.output}: {len(runs)} run{'s' if len(runs) != 1 else ''}"
                         f", {len(text) / 1e6:.1f} MB, {time.monotonic() - start:.2f} s",
                         markup=False)
    return 0
