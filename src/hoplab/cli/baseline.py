"""`hoplab baseline`: pin the value a series' latest runs are judged against, on the
dashboard's home and in the report, instead of the value before them."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hoplab import numbers
from hoplab.cli import store_arg
from hoplab.errors import UsageError

if TYPE_CHECKING:
    from hoplab.store import Store


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "baseline", help="pin the runs a series' latest runs are judged against",
        description="Pin a baseline: for each series the selected runs belong to (an "
                    "experiment, test, variant and labels, ordered by version, commit or "
                    "time), their value (one version, commit or invocation) becomes the "
                    "one its latest runs are judged against on the dashboard's home and in "
                    "the report, instead of the value before them. Pinning a series again "
                    "replaces its baseline. See docs/report-and-dashboard.md.",
        epilog="examples: hoplab baseline experiment=nat,version=v40; hoplab baseline "
               "--list; hoplab baseline --remove 2")
    p.add_argument("selection", nargs="?", metavar="SELECTION",
                   help="run ids (12-15) or conditions (experiment=nat,version=v40): one "
                        "value of each series it touches")
    p.add_argument("--list", action="store_true", help="list the pinned baselines")
    p.add_argument("--remove", metavar="ID", help="unpin baseline ID")
    p.add_argument("--json", action="store_true", help="with --list: as JSON")
    store_arg.add(p)
    p.set_defaults(func=run_baseline)


def run_baseline(args: argparse.Namespace) -> int:
    asks = sum((args.list, args.remove is not None, args.selection is not None))
    if asks != 1:
        raise UsageError("give one of: SELECTION, --list, --remove ID")
    if args.json and not args.list:
        raise UsageError("--json goes with --list")
    if args.list:
        return _list(args)
    from hoplab.store import open_store

    base_id = None if args.remove is None else numbers.whole(args.remove, "--remove")
    with open_store(store_arg.url(args), create=False) as store:
        store_arg.said_upgraded(store)
        if base_id is not None:
            gone = store.remove_baseline(base_id)
            _keep(store, gone.runs)
            print(f"removed baseline {gone.id} ({_series_title(gone.series)}: "
                  f"{_value(gone.series, gone.value)})")
            return 0
        return _pin(store, args.selection)


def _keep(store: Store, ids: Sequence[int]) -> None:
    """The series judged again against their new baselines, kept for the home."""
    from hoplab.analysis.changes import keep_judged
    from hoplab.kinds import HEADLINES

    keep_judged(store, HEADLINES, ids)


def _pin(store: Store, selection: str) -> int:
    from hoplab.analysis.baselines import pins_of_selection, value_text
    from hoplab.analysis.select import select
    from hoplab.analysis.trend import shown
    from hoplab.render.units import id_list
    ids = set(select(store, selection))
    runs = [r for r in store.runs_with_figures(()) if r.id in ids]
    found = pins_of_selection(runs, selection)
    made = store.pin_baselines([(s.key(), value_text(v), rs) for s, v, rs in found], selection)
    _keep(store, [i for _, _, rs in found for i in rs])
    for new, (series, value, rs) in zip(made, found, strict=True):
        print(f"baseline {new}: {series.title} by {series.by}: {shown(value, series.by)} "
              f"(runs {id_list(rs)})")
    return 0


def _series_title(key: str) -> str:
    from hoplab.analysis.changes import Series

    return Series.of_key(key).title


def _value(key: str, value: str) -> str:
    from hoplab.analysis.changes import Series
    from hoplab.analysis.trend import shown

    by = Series.of_key(key).by
    return f"{by} {shown(json.loads(value), by)}"


def _list(args: argparse.Namespace) -> int:
    from hoplab.analysis.changes import Series

    with store_arg.reading(args) as store:
        found = store.baselines()
        desc = store.describe()
    if args.json:
        json.dump([{"id": b.id, "series": Series.of_key(b.series).title,
                    "filters": Series.of_key(b.series).filters(),
                    "by": Series.of_key(b.series).by, "value": json.loads(b.value),
                    "runs": list(b.runs), "selection": b.selection,
                    "created_at": b.created_at} for b in found], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for b in found:
        print(f"{b.id}  {_series_title(b.series)}  {_value(b.series, b.value)}  "
              f"(pinned by {b.selection})")
    if not found:
        print(f"no baselines in {desc}")
    return 0
