"""Which way is better for a figure, judged from its name alone.

Names are split into words at '.' and '_' (``throughput_p5_down`` ->
throughput, p5, down; ``qdisc.backlog_bytes_max`` -> qdisc, backlog, bytes, max),
so one rule covers every percentile, direction and sampler variant of a figure.
"""

from __future__ import annotations

import re
from typing import Literal

Better = Literal["higher", "lower"]

# A harm word wins over a benefit word: "loss_rate" is a loss before it is a rate.
_LOWER = frozenset({
    "rtt", "latency", "jitter", "loss", "lost", "owd", "ipdv", "retransmits", "retrans",
    "retransmit", "drops", "overlimits", "backlog", "requeues", "errors", "cpu",
})
_HIGHER = frozenset({"throughput", "goodput", "rate", "jain", "share"})


def words(name: str) -> list[str]:
    return [w for w in re.split(r"[._]", name.lower()) if w]


def better(name: str) -> Better | None:
    """"higher" or "lower" if that way is better for `name`, None for neutral figures
    (packets, bytes, interface counters) that describe a run without judging it."""
    w = words(name)
    if "cpu" in w and "idle" in w:
        # An idle core is spare capacity; every other CPU share is work done.
        return "higher"
    if "out_of_order" in name.lower() or _LOWER.intersection(w):
        return "lower"
    if _HIGHER.intersection(w):
        return "higher"
    return None
