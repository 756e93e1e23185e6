"""The end-of-experiment summary: per test, one row per variant, the median over repetitions
with its spread, so a reader sees at once whether a difference is larger than the noise."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hoplab import kinds as registry
from hoplab import metrics
from hoplab.analysis.order import natural_key, variant_key
from hoplab.analysis.stats import median
from hoplab.analysis.trend import slope
from hoplab.record import RunRecord
from hoplab.render.headline import HEADLINE
from hoplab.render.units import notes as metric_notes
from hoplab.render.units import pairs, value


def _groups(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    groups: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        groups.setdefault((r.test, pairs(r.variant)), []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (natural_key(kv[0][0]),
                                                       variant_key(kv[1][0].variant))))


# A kind with a flow headline (custom: a set of flows with different jobs, bulk,
# interactive, ping) is summarised one row per flow, as seed 004's table has one column
# per measurement, after a row for the whole run.
ALL_FLOWS = "(all)"


def _columns(kind: str) -> tuple[str, ...]:
    """The figures a summary of `kind` shows: its flow headline, then its headline's
    others (whole-run figures such as Jain's index)."""
    k = registry.find(kind)
    if k is None:
        return ()
    return tuple(dict.fromkeys((*k.flow_headline, *k.headline)))


def _keyed(kind: str) -> str | None:
    k = registry.find(kind)
    return None if k is None else k.keyed


def _notes(kind: str) -> tuple[str, ...]:
    k = registry.find(kind)
    return () if k is None else k.notes


def _figures(runs: Sequence[RunRecord], names: Sequence[str], flow: str | None,
             key: str | None = None) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for name in names:
        values = [v for r in runs if (v := r.metric(name, flow=flow, key=key)) is not None
                  and not math.isnan(v)]
        if values:
            figures[name] = {"median": median(values), "min": min(values),
                             "max": max(values), "n": len(values)}
    return figures


def summary_rows(records: Sequence[RunRecord]) -> list[dict[str, Any]]:
    rows = []
    for (test, variant), runs in _groups(records).items():
        ok = [r for r in runs if r.status == "ok"]
        kind = runs[0].kind
        base = {"test": test, "kind": kind, "variant": variant, "runs": len(runs),
                "ok": len(ok)}
        if registry.per_flow(kind):
            flow_names = registry.get(kind).flow_headline
            flows = list(dict.fromkeys(m.flow for r in ok for m in r.metrics if m.flow))
            rows.append({**base, "flow": ALL_FLOWS,
                         "figures": _figures(ok, HEADLINE.get(kind, ()), None)})
            rows += [{**base, "flow": f, "figures": _figures(ok, flow_names, f)}
                     for f in flows]
            continue
        notes = {n: sorted({str(r.metadata[n]) for r in ok if n in r.metadata})
                 for n in _notes(kind)}
        if _keyed(kind):
            # One row per key of the headline figures (throughput: per frame size). Each
            # key is measured on its own (a search per size), so a run that failed at one
            # size keeps the figures of the sizes it measured.
            head = HEADLINE.get(kind, ())
            done = [r for r in runs if r.status in ("ok", "failed")]
            keys = list(dict.fromkeys(m.key for r in done for m in r.metrics
                                      if m.name in head and m.flow is None and m.key))
            rows += [{**base, "flow": k, "figures": _figures(done, head, None, k),
                      "grades": [], "notes": notes} for k in keys]
            continue
        rows.append({**base, "figures": _figures(ok, HEADLINE.get(kind, ()), None),
                     "grades": notes.get("grade", []), "notes": notes})
    return rows


def _cell(fig: dict[str, float] | None, unit: str) -> str:
    if fig is None:
        return "-"
    text = escape(value(fig["median"], unit))
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
        # Names from the experiment file are shown as they are, never read as markup.
        table = Table(title=escape(f"{title}: {test} ({kind})"), title_justify="left")
        table.add_column("variant", no_wrap=True)
        per_flow = registry.per_flow(kind)
        keyed = _keyed(kind)
        if per_flow or keyed:
            table.add_column(keyed or "flow", no_wrap=True)
        table.add_column("runs ok", justify="right")
        names = _columns(kind) if per_flow else HEADLINE.get(kind, ())
        if per_flow or keyed:
            # A composition shows the figures its flows have (no page load column for a
            # test without a web flow); a keyed kind those it measured (no PDR without a
            # loss target).
            names = tuple(n for n in names if any(n in row["figures"] for row in rows))
        for name in names:
            table.add_column(metrics.label(name), justify="right")
        notes = () if per_flow else _notes(kind)
        for note in notes:
            table.add_column(metrics.note_label(note))
        for row in rows:
            cells = [escape(row["variant"])] + ([escape(row["flow"])] if per_flow or keyed
                                                else [])
            cells.append(f"{row['ok']}/{row['runs']}")
            cells += [_cell(row["figures"].get(n), metrics.unit(n, units.get(n, "")))
                      for n in names]
            cells += [escape(",".join(row["notes"].get(n, [])) or "-") for n in notes]
            table.add_row(*cells)
        tables.append(table)
    hops = per_hop_table(records, units)
    if hops is not None:
        tables.append(hops)
    shown = [n for row in summary_rows(records) for n in row["figures"]]
    return Group(*tables, *(Text(f"note: {n}", style="dim") for n in metric_notes(shown)))


def _path(r: RunRecord) -> frozenset[str]:
    """What a run's links are, apart from how many: each distinct link's shaping and
    tunnel (from the lab's summary in its metadata; empty for a run without one)."""
    lab = r.metadata.get("lab")
    links = lab.get("links", []) if isinstance(lab, dict) else []
    return frozenset(json.dumps({k: lk.get(k) for k in ("wireguard", "forward", "reverse")},
                                sort_keys=True) for lk in links if isinstance(lk, dict))


def _same_path(by_hops: dict[float, list[tuple[float, frozenset[str]]]]
               ) -> tuple[list[float], list[float]]:
    """The hop counts whose links are those of the most hops (hops then are all that
    differs), and those whose links are not (hops = 1 of a chain whose bottleneck is a
    router-to-router link has no bottleneck at all)."""
    ref = {p for _, p in by_hops[max(by_hops)]}
    kept = [h for h in sorted(by_hops) if {p for _, p in by_hops[h]} == ref]
    return kept, [h for h in sorted(by_hops) if h not in kept]


def per_hop_rows(records: Sequence[RunRecord], axis: str = "hops") -> list[dict[str, Any]]:
    """Seed 000's question, "what does each hop cost?": for every test and every value of
    the other matrix keys, the least-squares slope of the headline figure's per-variant
    medians over the hop count, also in % of its value at the fewest hops; only over the
    hop counts whose links (shaping, tunnels) are those of the most hops, the others
    named in "left_out"."""
    groups: dict[tuple[str, str], dict[float, list[tuple[float, frozenset[str]]]]] = {}
    names: dict[str, str] = {}
    for r in records:
        hops = r.variant.get(axis)
        if r.status != "ok" or not isinstance(hops, int | float) or registry.per_flow(r.kind):
            continue
        name = HEADLINE.get(r.kind, ("",))[0]
        v = r.metric(name)
        if v is None or math.isnan(v):
            continue
        rest = pairs({k: x for k, x in r.variant.items() if k != axis})
        names[r.test] = name
        groups.setdefault((r.test, rest), {}).setdefault(float(hops), []).append((v, _path(r)))
    rows = []
    for (test, rest), by_hops in sorted(groups.items(),
                                        key=lambda kv: tuple(map(natural_key, kv[0]))):
        xs, left_out = _same_path(by_hops)
        if len(xs) < 2:
            continue
        ys = [median([v for v, _ in by_hops[x]]) for x in xs]
        step = slope(xs, ys)
        first = ys[0]
        rows.append({"test": test, "variant": rest, "metric": names[test], "hops": xs,
                     "medians": ys, "per_hop": step, "left_out": left_out,
                     "per_hop_pct": 100 * step / first if first else math.nan})
    return rows


def per_hop_table(records: Sequence[RunRecord], units: dict[str, str]) -> Table | None:
    rows = per_hop_rows(records)
    if not rows:
        return None
    t = Table(title="cost of each hop (least-squares slope of the medians over hops)",
              title_justify="left")
    for col in ("test", "variant", "figure", "fewest hops", "most hops", "per hop", "% per hop"):
        t.add_column(col, justify="left" if col in ("test", "variant", "figure") else "right")
    for r in rows:
        unit = metrics.unit(r["metric"], units.get(r["metric"], ""))
        pct = r["per_hop_pct"]
        t.add_row(*map(escape, (
            r["test"], r["variant"], metrics.label(r["metric"]),
            f"{value(r['medians'][0], unit)} ({r['hops'][0]:g})",
            f"{value(r['medians'][-1], unit)} ({r['hops'][-1]:g})",
            ("+" if r["per_hop"] > 0 else "") + value(r["per_hop"], unit),
            "-" if math.isnan(pct) else f"{pct:+.1f} %")))
    out = sorted({f"{h:g}" for r in rows for h in r["left_out"]}, key=float)
    if out:
        t.caption = (f"left out: hops={', '.join(out)}, whose links (shaping, tunnels) differ "
                     "from the most hops': there hops are not all that differs")
    return t
