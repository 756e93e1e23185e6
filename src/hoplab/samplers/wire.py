"""Counters of the userspace wires (hoplab-wire) of a lab, as sampler series.

Each wire rewrites a JSON file of its counters every 100 ms (see
hoplab.lab.wire); sampling reads that file, which costs one small read and no
system call into the wire. Series: wire.passed, wire.dropped_loss,
wire.dropped_queue, wire.dropped_aqm, wire.ecn_marked, wire.ce_marked (counters, frames),
wire.rehashes (counter), wire.queue_bytes, wire.queue_packets, wire.flows_active
and wire.held_bytes (gauges); node = the wire's short name ("w.INDEX", INDEX = the link's index),
key = "forward" (a -> b) or "reverse" (b -> a).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hoplab.lab import wire
from hoplab.lab.state import LABS_DIR, find
from hoplab.lab.where import lab_of, netns_prefix

# (series name, unit, counter in the stats file)
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("wire.passed", "frames", "passed"),
    ("wire.dropped_loss", "frames", "dropped_loss"),
    ("wire.dropped_queue", "frames", "dropped_queue"),
    ("wire.dropped_malformed", "frames", "dropped_malformed"),
    ("wire.duplicated", "frames", "duplicated"),
    ("wire.queue_bytes", "bytes", "queue_bytes"),
    ("wire.queue_packets", "packets", "queue_packets"),
    ("wire.held_bytes", "bytes", "held_bytes"),
    # The queue discipline's own: CoDel's drops and ECN marks, flow queues in use
    # (fq_codel's new + old lists, SFQ's active slots), SFQ's rehashes.
    ("wire.dropped_aqm", "frames", "dropped_aqm"),
    ("wire.ecn_marked", "frames", "ecn_marked"),
    # CE marks for a sojourn above ce_threshold (Linux's ce_mark, apart from ecn_mark).
    ("wire.ce_marked", "frames", "ce_marked"),
    ("wire.flows_active", "flows", "flows_active"),
    ("wire.rehashes", "count", "rehashes"),
)
DIRECTIONS = ("forward", "reverse")


def stats_path(netns: str) -> Path:
    """hoplab-LAB.w.INDEX (hoplab.lab.wire.netns_name) -> the stats file that wire writes."""
    lab = lab_of(netns)
    kind, dot, index = netns.removeprefix(netns_prefix(lab)).partition(".") if lab \
        else ("", "", "")
    if lab is None or (kind, dot) != ("w", ".") or not index.isdigit():
        raise ValueError(f"{netns} is not a wire namespace")
    return LABS_DIR / lab / "wire" / f"link{index}.json"


def read(netns: str) -> dict[str, dict[str, float]]:
    """{direction: {series name: value}}; empty before the wire's first write."""
    return _values(wire.read_stats(stats_path(netns)))


def series(text: str) -> list[tuple[str, str, str, float]]:
    """The stats file's text as (series name, unit, direction, value); none for a file
    the wire was writing when it was read (it rewrites it every 100 ms)."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    units = {name: unit for name, unit, _ in FIELDS}
    return [(name, units[name], direction, amount)
            for direction, values in _values(data if isinstance(data, dict) else None).items()
            for name, amount in values.items()]


def _values(data: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    if data is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for d in DIRECTIONS:
        counters = data.get(d, {})
        out[d] = {name: float(counters.get(field, 0)) for name, _, field in FIELDS}
    return out


def wire_namespaces(lab: str) -> list[tuple[str, str]]:
    """(short name, namespace) of every wire of a lab that is up: the sampler
    targets a run adds, as Target(short, netns, frozenset({"wire"}))."""
    state = find(lab)
    if state is None:
        return []
    return [(w["name"], w["netns"]) for w in state.summary.get("wires", [])]


def sojourn_edges_ms() -> list[float]:
    """Upper edges of the wire's sojourn histogram buckets (the stats file's
    "sojourn_hist", packets by time spent queued): 0.1 ms wide to 20 ms, 1 ms to
    200 ms, 10 ms to 2 s, then one open bucket (as wire/src/stats.rs)."""
    edges = [i * 0.1 for i in range(1, 201)]
    edges += [float(i) for i in range(21, 201)]
    edges += [i * 10.0 for i in range(21, 201)]
    return [*edges, math.inf]


def sojourn_quantile(before: list[int], after: list[int], q: float) -> float | None:
    """The q-quantile (0..1) of the sojourn of the packets queued between two stats
    files' histograms, in ms: the upper edge of the bucket it falls in (0.1 ms
    resolution below 20 ms). None when no packet was queued."""
    diff = [a - (before[i] if i < len(before) else 0) for i, a in enumerate(after)]
    total = sum(diff)
    if total <= 0:
        return None
    seen = 0
    for edge, n in zip(sojourn_edges_ms(), diff, strict=False):
        seen += n
        if seen >= q * total:
            return edge
    return math.inf
