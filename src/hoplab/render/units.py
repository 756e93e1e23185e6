"""Figures as people read them: 94.5 Mbit/s, 0.231 ms, 1.2 %."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from hoplab import kv, metrics

_RATE_STEPS = ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"))


def rate_scale(peak: float) -> tuple[float, str]:
    """Divisor and unit that keep rates up to `peak` readable on a plot axis (94.1
    Mbit/s, not 94100000 bit/s); the one choice for the report, dashboard and plots."""
    for div, unit in _RATE_STEPS:
        if abs(peak) >= div:
            return div, unit
    return 1.0, "bit/s"


def rate(bps: float) -> str:
    if math.isnan(bps):
        return "-"
    for div, unit in _RATE_STEPS:
        if abs(bps) >= div:
            return f"{bps / div:.3g} {unit}" if abs(bps) / div < 100 else \
                f"{bps / div:.0f} {unit}"
    return f"{bps:.0f} bit/s"


def value(v: float, unit: str) -> str:
    if math.isnan(v):
        return "-"
    if unit == "bit/s":
        return rate(v)
    if unit == "ms":
        return f"{v:.3f} ms" if abs(v) < 10 else f"{v:.1f} ms"
    if unit == "%":
        return f"{v:.2f} %" if abs(v) < 10 else f"{v:.1f} %"
    if unit in ("count", "packets", "segments"):
        return f"{v:.0f}"
    if unit == "bytes":
        for div, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if abs(v) >= div:
                return f"{v / div:.3g} {name}"
        return f"{v:.0f} B"
    if unit.endswith("/s"):
        return f"{v:.0f}/s"
    if unit == "flag":
        return "yes" if v else "no"
    if unit in ("index", "ratio"):
        return f"{v:.3f}"
    return f"{v:.4g} {unit}"


def pairs(d: Mapping[str, Any]) -> str:
    """A variant or a set of labels as people write them: "hops=2 wireguard=false", "-" if
    empty (hoplab.kv.pairs, the one way a value is printed)."""
    return kv.pairs(d)


def figure(v: float, name: str, stored_unit: str = "") -> str:
    """The value of metric `name` in the registry's unit (the stored one if unknown)."""
    return value(v, metrics.unit(name, stored_unit))


def metric_name(name: str, flow: str | None = None, node: str | None = None,
                key: str | None = None) -> str:
    """A figure as tables name it: its registry label, then where it was taken
    ("goodput @ bulk.1", "CPU softirq @ node=router,key=all")."""
    where = flow if node is None and key is None else ",".join(
        f"{f}={x}" for f, x in (("node", node), ("key", key), ("flow", flow)) if x)
    text = metrics.label(name)
    return f"{text} @ {where}" if where else text


def notes(names: Iterable[str]) -> list[str]:
    """What the registry says a reader must know of the figures `names` (each once, in
    order): "sent into socket: what the senders wrote ...", for the line under a table
    that shows them."""
    out = []
    for name in dict.fromkeys(names):
        said = metrics.note(name)
        if said:
            out.append(f"{metrics.label(name)}: {said}")
    return out


def id_list(ids: Iterable[int]) -> str:
    """Run ids as a selection names them: "3", "1-18", "4-6, 9" (consecutive ones as a
    range, never "3-3")."""
    spans: list[list[int]] = []
    for i in sorted(set(ids)):
        if spans and spans[-1][1] == i - 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in spans)
