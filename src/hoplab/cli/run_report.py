"""What `hoplab run` prints after the runs of an experiment with `report = true`
(docs/experiment-format.md): its two variants compared as `hoplab compare` does (a
verdict per figure), and where they were profiled each variant's flame graph (an SVG
in the current directory), their differential flame graph and `hoplab profile --diff`.
Each side is the variant's runs of this experiment, by id: older runs in the store
are not mixed in."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hoplab import kv
from hoplab.cli import store_arg
from hoplab.errors import HoplabError

if TYPE_CHECKING:
    from hoplab.record import RunRecord


def sides(records: Sequence[RunRecord], order: Sequence[str] = ()
          ) -> list[tuple[str, list[int]]]:
    """(the variant's pairs, its ok runs' ids), the variants in `order` (the matrix's:
    A is its first value whatever order the runs were shuffled into), the ids in the
    order the runs were made."""
    out: dict[str, list[int]] = {}
    for r in records:
        if r.id is not None and r.status == "ok":
            out.setdefault(kv.pairs(r.variant), []).append(r.id)
    rank = {pairs: i for i, pairs in enumerate(order)}
    return sorted(out.items(), key=lambda item: rank.get(item[0], len(rank)))


def _slug(pairs: str) -> str:
    """A file name's part from a variant's pairs: its values only."""
    values = "_".join(p.split("=", 1)[-1] for p in pairs.split())
    return re.sub(r"[^\w.+-]+", "_", values)[:80]


def _parser() -> argparse.ArgumentParser:
    """The commands the report runs, as the command line has them."""
    from hoplab.cli import compare, profile

    parser = argparse.ArgumentParser(prog="hoplab")
    sub = parser.add_subparsers(dest="command", required=True)
    compare.register(sub)
    profile.register(sub)
    return parser


def after_runs(args: argparse.Namespace, records: Sequence[RunRecord],
               order: Sequence[str] = ()) -> None:
    found = sides(records, order)
    if len(found) != 2:
        print(f"report: {len(found)} variants with ok runs; a report compares two")
        return
    store = [*(["--db", args.db] if args.db else []),
             *(["--db-file", args.db_file] if args.db_file else [])]
    a, b = (",".join(map(str, ids)) for _, ids in found)
    print(f"\nreport: A = {found[0][0]} (runs {a}); B = {found[1][0]} (runs {b})")
    parser = _parser()

    def command(*argv: str) -> None:
        parsed = parser.parse_args([*argv, *store])
        try:
            parsed.func(parsed)
        except HoplabError as e:
            print(f"report: hoplab {argv[0]}: {e}")

    command("compare", a, b)
    if not _profiled(args, found):
        return
    for name, ids in found:
        command("flamegraph", ",".join(map(str, ids)), "-o",
                f"hoplab-{_slug(name)}-flamegraph.svg")
    command("flamegraph", "--diff", a, b, "-o", f"hoplab-{_slug(found[0][0])}-vs-"
                                                 f"{_slug(found[1][0])}-diff.svg")
    command("profile", "--diff", a, b, "--top", "10")


def _profiled(args: argparse.Namespace, found: list[tuple[str, list[int]]]) -> bool:
    with store_arg.reading(args) as store:
        return all(isinstance(p := store.get_run(ids[0], series=False).metadata.get(
            "profile"), dict) and p.get("status") == "ok" for _, ids in found)
