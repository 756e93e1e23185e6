"""Which figures summarise a run of each test kind, in the order a reader wants them.

Their labels and units are in the metric registry (hoplab/metrics.py)."""

from __future__ import annotations

HEADLINE: dict[str, tuple[str, ...]] = {
    "tcp": ("goodput", "sent_rate", "throughput_p5", "retransmits"),
    "udp": ("goodput", "loss", "udp_jitter", "out_of_order"),
    "ping": ("rtt_median", "rtt_p95", "rtt_max", "loss", "rtt_jitter"),
    "probe": ("rtt_median", "rtt_p99", "owd_up_median", "owd_down_median", "ipdv_mean", "loss"),
    "rrul": ("goodput_up", "goodput_down", "latency_idle", "latency_load", "latency_increase"),
    "custom": ("goodput", "jain_index", "rtt_median", "rtt_jitter", "udp_jitter", "loss"),
}
