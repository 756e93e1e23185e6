"""Summary figures of sampled series over a window (the load phase of a run).

Cumulative counters (iface.*, qdisc.drops/overlimits/requeues/sent_*, tcp.*)
give their increase over the window (a fall is a wrap or a reset, told apart
in _increase), interface counters also a mean rate
(iface.rx_bps/tx_bps in bit/s, iface.rx_pps/tx_pps in packets/s); qdisc
backlogs give their maximum in bytes and in the qdisc's packets, where a GSO
super-frame is one (qdisc.backlog_bytes_max, qdisc.backlog_packets_max);
A TCP flow's state (tcp_info: tcp.cwnd, tcp.srtt, tcp.rttvar, tcp.pacing_rate,
tcp.delivery_rate) gives its median over the window, tcp.min_rtt its least; its
retrans and bytes are counters like the others.
CPU shares (cpu.*, and sampler.cpu, the device sampler's own share of one core)
give their mean over the window, each sample weighted by the part of
the interval it covers that lies inside the window: a sample taken at the very
start of the load phase describes the interval before it and weighs nothing.

For the others a sample belongs to the window when window[0] <= t <= window[1].
Deltas and rates are taken between the first and the last sample inside the
window, so they cover slightly less than the window (at most one interval at
each end) but never count anything outside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

from hoplab.analysis.stats import median
from hoplab.record import Metric, Series

_SAMPLED = ("cpu.", "iface.", "qdisc.", "tcp.", "wire.", "sampler.")
# Shares of an interval (%), averaged over the window rather than differenced.
_SHARES = ("cpu.", "sampler.cpu")
_GAUGES = frozenset({"qdisc.backlog_bytes", "qdisc.backlog_packets", "wire.queue_bytes",
                     "wire.held_bytes", "wire.queue_packets", "wire.flows_active"})
_MEDIANS = frozenset({"tcp.cwnd", "tcp.srtt", "tcp.rttvar", "tcp.pacing_rate",
                      "tcp.delivery_rate"})
_RATES = {"iface.rx_bytes": ("iface.rx_bps", 8.0, "bit/s"),
          "iface.tx_bytes": ("iface.tx_bps", 8.0, "bit/s"),
          "iface.rx_packets": ("iface.rx_pps", 1.0, "packets/s"),
          "iface.tx_packets": ("iface.tx_pps", 1.0, "packets/s")}


def _inside(series: Series, window: tuple[float, float] | None) -> list[int]:
    if window is None:
        return list(range(len(series.t)))
    lo, hi = window
    return [i for i, t in enumerate(series.t) if lo <= t <= hi]


# A fall is a wrap only if the rise it implies fits in this many intervals' worth of the
# counter's fastest rise between other samples, or in WRAP_NEAR (a counter that was
# within 65,536 of its top; a reset lands there once in 65,536 times).
WRAP_SLACK = 4.0
WRAP_NEAR = float(2**16)


def _peak_rate(series: Series) -> float:
    """The counter's fastest rise per second between two consecutive samples that did
    not fall (0.0 when there is none)."""
    return max((max(0.0, b - a) / (tb - ta)
                for (ta, a), (tb, b) in pairwise(zip(series.t, series.v, strict=True))
                if b >= a and tb > ta), default=0.0)


def _increase(prev: float, cur: float, dt: float, peak_rate: float) -> float:
    """How much a counter rose from prev to cur over dt seconds.

    A counter that went down either wrapped or was reset. A wrap of a 32-bit counter
    (64-bit above 2**32) means it was just below the top of its range: the rise it
    implies, top - prev + cur, is then no more than the counter counts in an interval.
    It is taken as a wrap only when that rise is at most WRAP_SLACK times the counter's
    fastest rise seen elsewhere in the series over dt, or at most WRAP_NEAR; otherwise
    as a reset to zero (an interface or qdisc deleted and created again, or a 64-bit
    counter that was never near the top). The rise is then cur, what was counted since
    the reset; whatever was counted between the previous sample and the reset is lost,
    so the delta errs low, never high.
    """
    if cur >= prev:
        return cur - prev
    modulus = float(2**32) if prev < 2**32 else float(2**64)
    wrapped = modulus - prev + cur
    return wrapped if wrapped <= max(WRAP_SLACK * peak_rate * dt, WRAP_NEAR) else cur


def counter_delta(series: Series, window: tuple[float, float] | None = None) -> float:
    """Increase of a cumulative counter over the window (0.0 with fewer than two
    samples in it); wraps and resets are told apart as described in _increase, with
    the fastest rise of the whole series."""
    idx = _inside(series, window)
    if len(idx) < 2:
        return 0.0
    peak = _peak_rate(series)
    t, v = series.t, series.v
    return sum(_increase(v[a], v[b], t[b] - t[a], peak) for a, b in pairwise(idx))


def _covered(series: Series, i: int) -> tuple[float, float]:
    """The interval sample i describes: (t[i-1], t[i]]; the very first sample of a
    series has no predecessor and is taken to cover one interval like the next one."""
    t = series.t
    if i > 0:
        return t[i - 1], t[i]
    return t[0] - (t[1] - t[0] if len(t) > 1 else 0.0), t[0]


def _share_mean(series: Series, window: tuple[float, float] | None) -> float | None:
    """Mean of interval shares, each weighted by how much of its interval lies in the
    window; None when no interval reaches into it. Samples without any width (a single
    one) count equally, if taken inside the window."""
    lo, hi = window if window is not None else (-math.inf, math.inf)
    total = weights = 0.0
    for i, value in enumerate(series.v):
        start, end = _covered(series, i)
        w = min(end, hi) - max(start, lo)
        if w > 0:
            total += value * w
            weights += w
    if weights > 0:
        return total / weights
    idx = _inside(series, window)
    return math.fsum(series.v[i] for i in idx) / len(idx) if idx else None


def sampler_metrics(series: Sequence[Series], *,
                    window: tuple[float, float] | None = None) -> list[Metric]:
    """Summary metrics of sampler series; series without samples in the window are
    left out, counters also when they have only one sample there."""
    out: list[Metric] = []
    for s in series:
        # Flow series (throughput, rtt) share the list; they are summarised elsewhere.
        if not s.name.startswith(_SAMPLED):
            continue

        def metric(name: str, value: float, unit: str, s: Series = s) -> None:
            out.append(Metric(name, value, unit, flow=s.flow, node=s.node, key=s.key))

        if s.name.startswith(_SHARES):
            share = _share_mean(s, window)
            if share is not None:
                metric(s.name, share, s.unit)
            continue
        idx = _inside(s, window)
        if not idx:
            continue
        if s.name in _GAUGES:
            metric(f"{s.name}_max", max(s.v[i] for i in idx), s.unit)
        elif s.name in _MEDIANS:
            metric(s.name, median([s.v[i] for i in idx]), s.unit)
        elif s.name == "tcp.min_rtt":
            metric(s.name, min(s.v[i] for i in idx), s.unit)
        elif len(idx) >= 2:
            delta = counter_delta(s, window)
            metric(s.name, delta, s.unit)
            rate = _RATES.get(s.name)
            span = s.t[idx[-1]] - s.t[idx[0]]
            if rate is not None and span > 0:
                metric(rate[0], delta * rate[1] / span, rate[2])
    return out
