"""Interface counters from /proc/net/dev, read inside a node's namespace.

`/proc/net` is a link to `/proc/self/net`, which shows the namespace of the
process's main thread, not of a thread that did setns(). A sampler thread
therefore reads `/proc/thread-self/net/dev`; the lab test checks that it shows
the node's interfaces. Values are the kernel's cumulative counters. On a veth a
GSO super-frame counts as one packet and its headers once, so bytes are close
to payload bytes and packets far fewer than frames on a wire.
"""

from __future__ import annotations

from dataclasses import dataclass

NET_DEV = "/proc/thread-self/net/dev"


@dataclass(frozen=True)
class IfaceCounters:
    rx_bytes: int
    rx_packets: int
    rx_errors: int
    rx_drops: int
    tx_bytes: int
    tx_packets: int
    tx_errors: int
    tx_drops: int


def parse_net_dev(text: str) -> dict[str, IfaceCounters]:
    """/proc/net/dev text to counters per interface, `lo` left out."""
    out = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep or name == "lo":
            continue
        f = [int(x) for x in rest.split()]
        # Receive: bytes packets errs drop fifo frame compressed multicast; transmit:
        # bytes packets errs drop fifo colls carrier compressed.
        out[name] = IfaceCounters(rx_bytes=f[0], rx_packets=f[1], rx_errors=f[2], rx_drops=f[3],
                                  tx_bytes=f[8], tx_packets=f[9], tx_errors=f[10],
                                  tx_drops=f[11])
    return out


def read_net_dev() -> dict[str, IfaceCounters]:
    with open(NET_DEV) as f:
        return parse_net_dev(f.read())


# (series name, unit, field) of what an interface sample records.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("iface.rx_bytes", "bytes", "rx_bytes"),
    ("iface.tx_bytes", "bytes", "tx_bytes"),
    ("iface.rx_packets", "packets", "rx_packets"),
    ("iface.tx_packets", "packets", "tx_packets"),
    ("iface.rx_drops", "packets", "rx_drops"),
    ("iface.tx_drops", "packets", "tx_drops"),
    ("iface.rx_errors", "packets", "rx_errors"),
    ("iface.tx_errors", "packets", "tx_errors"),
)
