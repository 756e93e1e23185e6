"""Counters of the userspace wires (hoplab-wire) of a lab, as sampler series.

Each wire rewrites a JSON file of its counters every 100 ms (see
hoplab.lab.wire); sampling reads that file, which costs one small read and no
system call into the wire. Series: wire.passed, wire.dropped_loss,
wire.dropped_queue (counters, frames), wire.queue_bytes and wire.held_bytes
(gauges); node = the wire's short name ("w.INDEX", INDEX = the link's index),
key = "forward" (a -> b) or "reverse" (b -> a).
"""

from __future__ import annotations

from pathlib import Path

from hoplab.lab import wire
from hoplab.lab.state import LABS_DIR, find

# (series name, unit, counter in the stats file)
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("wire.passed", "frames", "passed"),
    ("wire.dropped_loss", "frames", "dropped_loss"),
    ("wire.dropped_queue", "frames", "dropped_queue"),
    ("wire.dropped_malformed", "frames", "dropped_malformed"),
    ("wire.duplicated", "frames", "duplicated"),
    ("wire.queue_bytes", "bytes", "queue_bytes"),
    ("wire.held_bytes", "bytes", "held_bytes"),
)
DIRECTIONS = ("forward", "reverse")


def stats_path(netns: str) -> Path:
    """hoplab-LAB-w.INDEX -> the stats file that wire writes."""
    lab, _, index = netns.removeprefix("hoplab-").rpartition("-w.")
    if not lab or not index.isdigit():
        raise ValueError(f"{netns} is not a wire namespace")
    return LABS_DIR / lab / "wire" / f"link{index}.json"


def read(netns: str) -> dict[str, dict[str, float]]:
    """{direction: {series name: value}}; empty before the wire's first write."""
    data = wire.read_stats(stats_path(netns))
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
