"""Which figures summarise a run of each test kind, in the order a reader wants them."""

from __future__ import annotations

HEADLINE: dict[str, tuple[str, ...]] = {
    "tcp": ("goodput", "sent_rate", "throughput_p5", "retransmits"),
    "udp": ("goodput", "loss", "jitter", "out_of_order"),
    "ping": ("rtt_median", "rtt_p95", "rtt_max", "loss", "jitter"),
    "probe": ("rtt_median", "rtt_p99", "owd_up_median", "owd_down_median", "ipdv_mean", "loss"),
    "rrul": ("goodput_up", "goodput_down", "latency_idle", "latency_load", "latency_increase"),
    "custom": ("goodput", "jain_index", "rtt_median", "jitter", "loss"),
}

LABELS = {
    "goodput": "goodput", "sent_rate": "sender rate", "throughput_p5": "p5 rate",
    "retransmits": "retrans", "loss": "loss", "jitter": "jitter", "out_of_order": "reordered",
    "rtt_median": "RTT median", "rtt_p95": "RTT p95", "rtt_p99": "RTT p99", "rtt_max": "RTT max",
    "owd_up_median": "one-way up", "owd_down_median": "one-way down", "ipdv_mean": "IPDV",
    "goodput_up": "goodput up", "goodput_down": "goodput down", "latency_idle": "idle RTT",
    "latency_load": "loaded RTT", "latency_increase": "added latency", "jain_index": "Jain",
}


def unit_of(name: str) -> str:
    """The unit of a headline figure, for summaries (RunSummary) that keep values only."""
    if name.startswith(("goodput", "throughput", "sent_rate")):
        return "bit/s"
    if name == "loss":
        return "%"
    if name in ("retransmits", "out_of_order"):
        return "count"
    return "index" if name == "jain_index" else "ms"
