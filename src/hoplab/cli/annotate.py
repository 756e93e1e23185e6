"""`hoplab annotate`: say what happened to the lab, on a label value or at a time, so that
trend charts and the dashboard's changes show it beside the figures."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

from hoplab import kv, numbers
from hoplab.cli import store_arg
from hoplab.errors import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "annotate", help="note what happened (a firmware change, a cable swapped)",
        description="Store an annotation on a label value (version=v45: drawn at that "
                    "value on trend charts) or at a time (--at: drawn between the values "
                    "measured before and after it), shown on the trend charts of the "
                    "dashboard and the report and beside the dashboard's changes. See "
                    "docs/report-and-dashboard.md.",
        epilog='examples: hoplab annotate version=v45 "kernel 6.1 -> 6.6"; hoplab annotate '
               '--at "2025-11-20 14:00" "cable swapped"; hoplab annotate --list; hoplab '
               "annotate --remove 3")
    p.add_argument("words", nargs="*", metavar="[KEY=VALUE] TEXT",
                   help="the label value it is about (omit with --at), then its text")
    p.add_argument("--at", metavar="TIME",
                   help="a time instead of a label value: 2025-11-20, 2025-11-20 14:00, "
                        "ISO 8601 with an offset, or Unix seconds (local time unless told)")
    p.add_argument("--list", action="store_true", help="list the annotations")
    p.add_argument("--remove", metavar="ID", help="remove annotation ID")
    p.add_argument("--json", action="store_true", help="with --list: as JSON")
    store_arg.add(p)
    p.set_defaults(func=run_annotate)


def parse_time(text: str) -> float:
    """Unix seconds from TIME as --at takes it; UsageError naming it otherwise."""
    text = text.strip()
    if text.isascii() and text.replace(".", "", 1).isdigit():
        return float(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--at {text!r}: not a time; write 2025-11-20, 2025-11-20 14:00, "
                         "2025-11-20T14:00:00+01:00 or Unix seconds") from None
    return when.timestamp()        # naive: local time, as the runs' times are shown


def _what(args: argparse.Namespace) -> tuple[str, str | None, str | None, float | None]:
    """(text, key, value, at) of a new annotation; UsageError for anything else."""
    if args.at is not None:
        if len(args.words) != 1:
            raise UsageError('with --at, give the text only: hoplab annotate --at TIME "text"')
        return args.words[0], None, None, parse_time(args.at)
    if len(args.words) != 2:
        raise UsageError('give a label value and a text: hoplab annotate version=v45 "text" '
                         '(or --at TIME "text", --list, --remove ID)')
    key, value = kv.split(args.words[0], "annotate", "version=v45")
    return args.words[1], key, value, None


def run_annotate(args: argparse.Namespace) -> int:
    from hoplab.store import open_store

    asks = sum((args.list, args.remove is not None, bool(args.words) or args.at is not None))
    if asks != 1:
        raise UsageError("give one of: KEY=VALUE TEXT, --at TIME TEXT, --list, --remove ID")
    if args.json and not args.list:
        raise UsageError("--json goes with --list")
    note_id = None if args.remove is None else numbers.whole(args.remove, "--remove")
    what = None if args.list or note_id is not None else _what(args)
    with open_store(store_arg.url(args)) as store:
        if args.list:
            notes = store.annotations()
            if args.json:
                json.dump([{"id": a.id, "key": a.key, "value": a.value, "at": a.at,
                            "text": a.text, "created_at": a.created_at} for a in notes],
                          sys.stdout, indent=2)
                sys.stdout.write("\n")
            for a in [] if args.json else notes:
                print(f"{a.id}  {a.where}  {a.text}")
            if not notes and not args.json:
                print(f"no annotations in {store.describe()}")
            return 0
        if note_id is not None:
            gone = store.remove_annotation(note_id)
            print(f"removed annotation {gone.id} ({gone.where}: {gone.text})")
            return 0
        assert what is not None
        text, key, value, at = what
        new = store.add_annotation(text, key=key, value=value, at=at)
        if key is not None and not store.list_runs({key: str(value)}, limit=1, figures=False):
            print(f"note: no stored run has {key}={value} yet", file=sys.stderr)
    print(f"annotation {new}: {key}={value}: {text}" if key is not None else
          f"annotation {new}: at {args.at}: {text}")
    return 0
