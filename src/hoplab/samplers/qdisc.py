"""Queueing discipline counters as sampler series: backlog, drops, overlimits,
requeues, sent, of every qdisc but `lo`'s and `noqueue` ones (hoplab.tools.tc reads
them).

The samplers use netlink: an `IPRoute()` socket opened by a thread after setns() lives
in that namespace, so a tick costs one netlink dump instead of a fork. Measured on the
2-core target, per sample of a node with 4 qdiscs: pyroute2 `get_qdiscs()` 0.5 ms,
`tc -s -j qdisc show` 2.2 ms (fork + exec + JSON).

Packets are the qdisc's own count, what the kernel queued: with GSO a super-frame of
up to 64 KiB is one packet (a 50 Mbit/s FIFO under four TCP flows peaked at 144
packets holding 4.16 MB), so the bytes (`backlog_bytes`, `sent_bytes`) are kept beside
them and shown with them.
"""

from __future__ import annotations

# (series name, unit, field) of what a qdisc sample records.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("qdisc.backlog_bytes", "bytes", "backlog_bytes"),
    ("qdisc.backlog_packets", "packets", "backlog_packets"),
    ("qdisc.drops", "packets", "drops"),
    ("qdisc.overlimits", "packets", "overlimits"),
    ("qdisc.requeues", "packets", "requeues"),
    ("qdisc.sent_bytes", "bytes", "sent_bytes"),
    ("qdisc.sent_packets", "packets", "sent_packets"),
)
