"""`hoplab profile --diff A B`: two runs or selections of profiled runs, side by side."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hoplab.analysis import select
from hoplab.cli import store_arg
from hoplab.profile.diff import FDR, ProfileDiff, diff
from hoplab.profile.stored import side_stacks


def _json(d: ProfileDiff, sides: dict[str, tuple[str, list[int], list[int]]],
          node: str | None) -> dict[str, Any]:
    def side(key: str, samples: tuple[int, ...], top: tuple[tuple[str, float], ...]
             ) -> dict[str, Any]:
        spec, runs, skipped = sides[key]
        return {"selection": spec, "runs": runs, "skipped_without_profile": skipped,
                "samples": list(samples),
                "top": [{"symbol": s, "percent": p} for s, p in top]}

    return {
        "node": node,
        "a": side("a", d.a_samples, d.a_top),
        "b": side("b", d.b_samples, d.b_top),
        "test": {"name": "Mann-Whitney U, two-sided, on each profile's share",
                 "correction": "Benjamini-Hochberg", "fdr": FDR, "tested": d.tested,
                 "min_p": d.min_p},
        "symbols": [{"symbol": c.symbol, "a_percent": c.a_pct, "b_percent": c.b_pct,
                     "change_points": c.change_pts, "a_values": list(c.a_values),
                     "b_values": list(c.b_values), "p": c.p,
                     "beyond_noise": c.beyond_noise} for c in d.symbols],
    }


def _verdict(beyond: bool | None) -> str:
    return "" if beyond is None else ("beyond noise" if beyond else "within noise")


def _render(d: ProfileDiff, sides: dict[str, tuple[str, list[int], list[int]]],
            top: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    from hoplab.render.console import console

    out = console()
    for key, samples in (("a", d.a_samples), ("b", d.b_samples)):
        spec, runs, skipped = sides[key]
        note = f"; left out, no profile: {', '.join(map(str, skipped))}" if skipped else ""
        out.print(f"{key.upper()}: {spec} -> {len(runs)} profile(s), runs "
                  f"{', '.join(map(str, runs))}, {sum(samples)} samples{note}", markup=False)
    change = {c.symbol: c for c in d.symbols}
    t = Table(title=f"top {top} symbols by self time (mean share of each side's profiles)",
              title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("A", justify="right")
    t.add_column("symbol")
    t.add_column("B", justify="right")
    t.add_column("symbol")
    t.add_column("B - A", justify="right")
    for i in range(max(len(d.a_top), len(d.b_top))):
        a = d.a_top[i] if i < len(d.a_top) else None
        b = d.b_top[i] if i < len(d.b_top) else None
        t.add_row(str(i + 1),
                  f"{a[1]:5.2f} %" if a else "", escape(a[0]) if a else "",
                  f"{b[1]:5.2f} %" if b else "", escape(b[0]) if b else "",
                  f"{change[b[0]].change_pts:+.2f}" if b else "")
    out.print(t)
    c = Table(title="change per symbol, largest first (points of self time)",
              title_justify="left")
    for name, justify in (("symbol", "left"), ("A", "right"), ("B", "right"),
                          ("change", "right"), ("p", "right"), ("verdict", "left")):
        c.add_column(name, justify=justify)  # type: ignore[arg-type]
    for ch in d.symbols:
        c.add_row(escape(ch.symbol), f"{ch.a_pct:5.2f} %", f"{ch.b_pct:5.2f} %",
                  f"{ch.change_pts:+.2f}", "" if ch.p is None else f"{ch.p:.3g}",
                  _verdict(ch.beyond_noise))
    out.print(c)
    if not d.tested:
        out.print("one profile on a side: no test tells these changes from noise; "
                  "profile more repetitions of each (3 or more a side, 5 to decide at p < "
                  "0.01)")
    elif not d.can_decide:
        out.print(f"with {len(d.a_samples)} and {len(d.b_samples)} profiles the rank test "
                  f"cannot go below p = {d.min_p:.3g}: no change can be shown beyond noise; "
                  f"profile more repetitions")
    else:
        out.print(f"beyond noise: Mann-Whitney on each profile's share, Benjamini-Hochberg "
                  f"at {FDR:.0%} false discoveries across the {len(d.symbols)} symbols "
                  f"listed")


def run_diff(args: argparse.Namespace) -> int:
    with store_arg.reading(args) as store:
        ids_a, ids_b = select.select_pair(store, args.runs[0], args.runs[1])
        runs_a, a, skip_a = side_stacks(store, args.runs[0], ids_a, args.node)
        runs_b, b, skip_b = side_stacks(store, args.runs[1], ids_b, args.node)
    d = diff(a, b, args.top)
    sides = {"a": (args.runs[0], runs_a, skip_a), "b": (args.runs[1], runs_b, skip_b)}
    if args.json:
        json.dump(_json(d, sides, args.node), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    _render(d, sides, args.top)
    return 0
