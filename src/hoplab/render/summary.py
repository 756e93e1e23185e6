"""The end-of-experiment summary: per test, one row per variant, the median over repetitions
with its spread, so a reader sees at once whether a difference is larger than the noise."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.table import Table

from hoplab.analysis.stats import median
from hoplab.render.headline import HEADLINE, LABELS
from hoplab.render.units import value
from hoplab.run.record import RunRecord


def _variant_label(variant: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in variant.items()) or "-"


def _groups(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        groups.setdefault((r.test, _variant_label(r.variant)), []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0][0], _sort_key(kv[1][0].variant))))


def _sort_key(variant: dict[str, Any]) -> tuple[Any, ...]:
    return tuple((0, v, "") if isinstance(v, int | float) else (1, 0, str(v))
                 for v in variant.values())


def summary_rows(records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    rows = []
    for (test, variant), runs in _groups(records).items():
        ok = [r for r in runs if r.status == "ok"]
        kind = runs[0].kind
        figures: dict[str, dict[str, float]] = {}
        for name in HEADLINE.get(kind, ()):
            values = [v for r in ok if (v := r.metric(name)) is not None]
            if values:
                figures[name] = {"median": median(values), "min": min(values),
                                 "max": max(values), "n": len(values)}
        grades = sorted({str(r.metadata["grade"]) for r in ok if "grade" in r.metadata})
        rows.append({"test": test, "kind": kind, "variant": variant, "runs": len(runs),
                     "ok": len(ok), "figures": figures, "grades": grades})
    return rows


def _cell(fig: dict[str, float] | None, unit: str) -> str:
    if fig is None:
        return "-"
    text = value(fig["median"], unit)
    mid = fig["median"]
    if fig["n"] > 1 and mid and not math.isnan(mid):
        spread = 100 * (fig["max"] - fig["min"]) / abs(mid)
        text += f" [dim]±{spread / 2:.1f}%[/]"
    return text


def summary_table(records: Sequence[RunRecord], title: str) -> Group:
    units = {m.name: m.unit for r in records for m in r.metrics}
    tables = []
    by_test: dict[str, list[dict[str, Any]]] = {}
    for row in summary_rows(records):
        by_test.setdefault(row["test"], []).append(row)
    for test, rows in by_test.items():
        kind = rows[0]["kind"]
        table = Table(title=f"{title}: {test} ({kind})", title_justify="left")
        table.add_column("variant")
        table.add_column("runs ok", justify="right")
        names = HEADLINE.get(kind, ())
        for name in names:
            table.add_column(LABELS.get(name, name), justify="right")
        if kind == "rrul":
            table.add_column("grade")
        for row in rows:
            cells = [row["variant"], f"{row['ok']}/{row['runs']}"]
            cells += [_cell(row["figures"].get(n), units.get(n, "")) for n in names]
            if kind == "rrul":
                cells.append(",".join(row["grades"]) or "-")
            table.add_row(*cells)
        tables.append(table)
    return Group(*tables)
