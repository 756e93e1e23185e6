"""RFC 6349's figures of a TCP test (Framework for TCP Throughput Testing, section 3.3),
from each flow's tcp_info series on its sender (hoplab.samplers.tcp_info):

- `tcp_efficiency`: bytes sent less bytes retransmitted, over bytes sent, in % (the
  connection's own counts over its whole life: its last sample);
- `buffer_delay_ms`: the mean smoothed RTT over the load phase less the idle RTT, in ms;
  `buffer_delay_pct` the same over the idle RTT, in %, only where the idle RTT is a real
  path's (at least REAL_PATH_MS: a veth pair's 0.02 ms would make 5 ms of queue
  25,000 %). The idle RTT is a probe's before the load where the test has one
  (`latency_idle`), else the least RTT the connection saw (tcp_info's min_rtt);
- `transfer_time_ratio`: the actual transfer time over the ideal one, where the
  bottleneck's rate is known. For the same bytes, that is the bottleneck's payload rate
  over the goodput: 1.0 is a transfer that carried all the bottleneck could.

Per flow (and node: a --bidir flow's two senders) and for the test: its flows' bytes
summed, their RTT samples pooled. The transfer time ratio is the test's, per direction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from hoplab.analysis.stats import mean
from hoplab.record import Metric, Series

# Bytes of a full-size TCP segment's frame beyond its payload, and beyond the MTU: TCP
# with timestamps (20 + 12), IPv4 (20) or IPv6 (40); the Ethernet header that a shaper's
# rate counts (14: docs/lab-format.md, "What a rate counts").
TCP_HEADER = 32
IP_HEADER = {4: 20, 6: 40}
ETHERNET_HEADER = 14


def payload_rate(rate_bps: float, family: int = 4, mtu: int = 1500) -> float:
    """What TCP carries through a link whose rate counts Ethernet frames: full segments
    of MTU less the IP and TCP headers, each in a frame of MTU plus 14 bytes (20 Mbit/s:
    20e6 x 1448 / 1514 = 19.13 Mbit/s over IPv4)."""
    return rate_bps * (mtu - IP_HEADER[family] - TCP_HEADER) / (mtu + ETHERNET_HEADER)


def efficiency(sent: float, retrans: float) -> float | None:
    return 100.0 * (sent - retrans) / sent if sent > 0 else None


# The least idle RTT a share is taken of. Below it the "path" is this machine's own stack
# (namespaces without delay: 0.02-0.05 ms), where a percentage says nothing a person can
# use; RFC 6349 frames buffer delay for paths with a real round trip.
REAL_PATH_MS = 1.0


def buffer_delay(loaded_ms: float, idle_ms: float) -> float | None:
    """The loaded RTT's excess as a share of the idle RTT, in %, or None where the idle
    RTT is below a real path's (REAL_PATH_MS)."""
    return 100.0 * (loaded_ms - idle_ms) / idle_ms if idle_ms >= REAL_PATH_MS else None


def _buffer_delay(loaded_ms: float, idle_ms: float, **where: str | None) -> list[Metric]:
    out = [Metric("buffer_delay_ms", loaded_ms - idle_ms, "ms", **where)]
    pct = buffer_delay(loaded_ms, idle_ms)
    if pct is not None:
        out.append(Metric("buffer_delay_pct", pct, "%", **where))
    return out


def transfer_time_ratio(ideal_bps: float, goodput_bps: float) -> float | None:
    """Actual over ideal transfer time of the same bytes: ideal rate over achieved."""
    return ideal_bps / goodput_bps if goodput_bps > 0 else None


Sender = tuple[str, str | None, str | None]     # (flow, node, key) of a flow's series


def _by_sender(series: Sequence[Series]) -> dict[Sender, dict[str, Series]]:
    out: dict[Sender, dict[str, Series]] = {}
    for s in series:
        if s.flow is not None and s.name.startswith("tcp.") and s.v:
            out.setdefault((s.flow, s.node, s.key), {})[s.name] = s
    return out


def _in(s: Series, window: tuple[float, float]) -> list[float]:
    return [v for t, v in zip(s.t, s.v, strict=True) if window[0] <= t <= window[1]]


def figures(series: Sequence[Series], window: tuple[float, float], *,
            idle_rtt_ms: float | None = None,
            goodput: Mapping[str | None, float] | None = None,
            ideal: Mapping[str | None, float] | None = None) -> list[Metric]:
    """The figures of a test from its series (sampler series of other names are left
    alone). `goodput` and `ideal` (the bottleneck's payload rate) are per direction key,
    None for a test whose data goes one way; a direction missing from either gets no
    transfer time ratio."""
    out: list[Metric] = []
    sent_all = retrans_all = 0.0
    srtt_all: list[float] = []
    idles: list[float] = []
    for (flow, node, key), got in _by_sender(series).items():
        sent, retrans = got.get("tcp.bytes_sent"), got.get("tcp.bytes_retrans")
        if sent is not None:
            lost = retrans.v[-1] if retrans is not None else 0.0
            eff = efficiency(sent.v[-1], lost)
            if eff is not None:
                out.append(Metric("tcp_efficiency", eff, "%", flow=flow, node=node, key=key))
                sent_all += sent.v[-1]
                retrans_all += lost
        srtt = _in(got["tcp.srtt"], window) if "tcp.srtt" in got else []
        floor = got.get("tcp.min_rtt")
        idle = idle_rtt_ms if idle_rtt_ms is not None else (
            min(floor.v) if floor is not None else None)
        if floor is not None:
            idles.append(min(floor.v))
        if srtt and idle is not None:
            out += _buffer_delay(mean(srtt), idle, flow=flow, node=node, key=key)
        srtt_all += srtt
    whole = efficiency(sent_all, retrans_all)
    if whole is not None:
        out.append(Metric("tcp_efficiency", whole, "%"))
    idle = idle_rtt_ms if idle_rtt_ms is not None else min(idles, default=None)
    if srtt_all and idle is not None:
        out += _buffer_delay(mean(srtt_all), idle)
    for key, rate in (ideal or {}).items():
        achieved = (goodput or {}).get(key)
        ratio = transfer_time_ratio(rate, achieved) if achieved is not None else None
        if ratio is not None and math.isfinite(ratio):
            out.append(Metric("transfer_time_ratio", ratio, "ratio", key=key))
    return out
