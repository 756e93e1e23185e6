"""The one registry of metrics: every summary figure a run can carry, with its
unit, its label and which direction is better.

Tables, plots, compare, the report and the dashboard read labels, units and
directions here and nowhere else. A figure that is not registered is an error
in the test suite (tests/unit/test_metrics_registry.py builds runs of every test
kind and checks every name they produce); in production an unknown name (a run
stored by a newer hoplab, an import) is shown by its raw name, gets no verdict
and a warning, and never crashes a view.

A name is registered exactly (``goodput``) or as a family: a prefix ending in
"." or "_*" (``profile.``: every profile category) whose label holds "{}" for
the rest of the name. A per-flow, per-node or per-core figure has the same name
as the whole-run one (the flow, node and key are not part of the name).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from hoplab.errors import UsageError

# "neutral": a figure that describes a run without judging it (packets sent,
# bytes, interface counters). It is stated explicitly so that a new metric can
# never fall through to "no verdict" by accident.
Better = Literal["higher", "lower", "neutral"]


@dataclass(frozen=True)
class MetricDef:
    name: str       # exact name, or a family prefix ending in "." or "_*" (see lookup)
    unit: str       # the unit the value is stored in: "bit/s", "ms", "%", "count", ...
    label: str      # what a table or axis calls it
    better: Better
    # For the median of independent trials that a run also keeps one by one (a page
    # load per point of series `samples`): what one trial is called. compare then
    # judges the figure on every trial, not on one value per run (docs/compare.md).
    samples: str | None = None
    trial: str = "run"
    # What a reader must know to read the figure right, said wherever it is shown (a
    # figure that can exceed what the path carries, say).
    note: str = ""


class UnknownMetric(KeyError):
    """A metric name with no entry in the registry."""


_REGISTRY: dict[str, MetricDef] = {}
_FAMILIES: dict[str, MetricDef] = {}     # prefix ("profile.", "foo_") -> its definition


def register(*defs: MetricDef) -> None:
    for d in defs:
        family = d.name.endswith((".", "_*"))
        table, key = (_FAMILIES, d.name.removesuffix("*")) if family else (_REGISTRY, d.name)
        if key in table and table[key] != d:
            raise ValueError(f"metric {d.name} registered twice, differently")
        table[key] = d


def find(name: str) -> MetricDef | None:
    """The definition of `name` (for a family member, with its own name and label), or
    None if it is not registered."""
    d = _REGISTRY.get(name)
    if d is not None:
        return d
    # The longest prefix wins: "cpu.idle" is exact, "profile.kernel" a family member.
    for prefix in sorted(_FAMILIES, key=len, reverse=True):
        rest = name[len(prefix):]
        if name.startswith(prefix) and rest:
            fam = _FAMILIES[prefix]
            return replace(fam, name=name, label=fam.label.format(rest))
    return None


def lookup(name: str) -> MetricDef:
    """The definition of `name`; raises UnknownMetric for an unregistered name."""
    d = find(name)
    if d is None:
        raise UnknownMetric(name)
    return d


def label(name: str) -> str:
    """What a table or an axis calls `name`; the raw name if it is unknown."""
    d = find(name)
    return name if d is None else d.label


def unit(name: str, stored: str = "") -> str:
    """The unit of `name`; `stored` (the unit a run carries) if it is unknown."""
    d = find(name)
    return stored if d is None else d.unit


def better(name: str) -> Literal["higher", "lower"] | None:
    """"higher" or "lower" if that way is better for `name`; None for a neutral figure
    and for an unknown one (which compare then names in a warning)."""
    d = find(name)
    if d is None or d.better == "neutral":
        return None
    return d.better


def note(name: str) -> str:
    """What every view showing `name` says of it beside its table; "" for most."""
    d = find(name)
    return "" if d is None else d.note


# Run notes (metadata) a kind's summary shows as a column (kind_registry.Kind.notes), and
# what that column is called: a note is text, never judged, but labelled like a figure.
NOTE_LABELS: dict[str, str] = {
    "grade": "grade",
    "load_levels": "loaded RTT in two levels",
    "short_trials": "trial length",
    "generator": "frame generator",
}


def note_label(name: str) -> str:
    """What a summary's column of run note `name` is called; the raw name if unknown."""
    return NOTE_LABELS.get(name, name)


def trials(name: str) -> tuple[str, str] | None:
    """(series, what one point is called) when `name` is the median of trials kept one
    by one in that series (web_load: every page load); None otherwise."""
    d = find(name)
    return None if d is None or d.samples is None else (d.samples, d.trial)


def trial_series() -> frozenset[str]:
    """Every series that holds trials: what compare must load beside the figures."""
    return frozenset(d.samples for d in (*_REGISTRY.values(), *_FAMILIES.values())
                     if d.samples is not None)


def all_metrics() -> list[MetricDef]:
    return sorted([*_REGISTRY.values(), *_FAMILIES.values()], key=lambda d: d.name)


def require(name: str, present: Iterable[str], what: str = "metric") -> None:
    """UsageError unless metric `name` is one that the selected runs have (`present`,
    their metric names), listing those names, the nearest to a typo, and for a name
    this registry does not know either, every name it does (a family as "profile.*")."""
    have = sorted(set(present))
    if name in have:
        return
    near = {*have, *(d.name for d in all_metrics() if not d.name.endswith((".", "*")))}
    close = difflib.get_close_matches(name, sorted(near - {name}), n=3)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    where = f"; they have {', '.join(have)}" if have else ""
    known = ""
    if find(name) is None:
        names = [d.name + "*" if d.name.endswith(".") else d.name for d in all_metrics()]
        known = f"; hoplab's metrics are {', '.join(names)}"
    raise UsageError(f"{what} {name!r}: no selected run has this metric{hint}{where}{known}")


def _m(name: str, unit: str, label: str, better: Better) -> MetricDef:
    return MetricDef(name, unit, label, better)


# Latency of probes (ping, irtt) in ms, whole-run (pooled) and per flow.
register(
    *(_m(f"rtt_{q}", "ms", f"RTT {q}", "lower")
      for q in ("min", "median", "mean", "p95", "p99", "max")),
    # Two different figures: the mean difference of successive RTTs of a probe stream,
    # and iperf3's receiver-side UDP jitter (RFC 3550). Runs stored before they had
    # their own names carry either as "jitter".
    _m("rtt_jitter", "ms", "RTT jitter", "lower"),
    _m("udp_jitter", "ms", "UDP jitter", "lower"),
    _m("jitter", "ms", "jitter", "lower"),
    _m("owd_up_median", "ms", "one-way up", "lower"),
    _m("owd_down_median", "ms", "one-way down", "lower"),
    _m("ipdv_mean", "ms", "IPDV", "lower"),
    _m("latency_idle", "ms", "idle RTT", "lower"),
    _m("latency_load", "ms", "loaded RTT", "lower"),
    _m("latency_load_p95", "ms", "loaded RTT p95", "lower"),
    _m("latency_increase", "ms", "added latency", "lower"),
    # Spikes of an RTT series above its own running baseline (hoplab.analysis.spikes):
    # how many, the largest, and the period they recur with when they do.
    _m("spikes", "count", "RTT spikes", "lower"),
    _m("spike_max", "ms", "largest spike", "lower"),
    _m("level_shifts", "count", "RTT level shifts", "neutral"),
    _m("spike_period", "s", "spike period", "neutral"),
    _m("spike_period_confidence", "%", "period confidence", "neutral"),
)

# Rates in bit/s. The whole-run ones also per direction (_up, _down) when a test
# moves data both ways; the throughput_* are statistics of the summed rate series.
_RATE_STATS = (("mean", "mean rate"), ("median", "median rate"), ("p5", "p5 rate"),
               ("p95", "p95 rate"))
register(
    *(_m(f"throughput_{stat}{suffix}", "bit/s", f"{text}{suffix.replace('_', ' ')}", "higher")
      for stat, text in _RATE_STATS for suffix in ("", "_up", "_down")),
    _m("goodput", "bit/s", "goodput", "higher"),
    _m("goodput_up", "bit/s", "goodput up", "higher"),
    _m("goodput_down", "bit/s", "goodput down", "higher"),
    # iperf3 --bidir: what came back the other way on the same flow.
    _m("goodput_reverse", "bit/s", "goodput reverse", "higher"),
    # Seed 003 sums iperf3's sender lines; TCP's sender counts what the application
    # wrote into its socket, part of which is still buffered when the test ends (114
    # Mbit/s through a 100 Mbit/s link in 3 s). Never a TCP test's headline.
    MetricDef("sent_rate", "bit/s", "sent into socket", "higher",
              note="what the senders wrote into their sockets (iperf3's sender side); "
                   "TCP may still hold part of it in its buffers when the test ends, so "
                   "it can exceed what the path carries: goodput is what arrived"),
    _m("bytes_received", "bytes", "bytes received", "neutral"),
    _m("retransmits", "count", "retrans", "lower"),
)

# RFC 6349's figures of TCP tests, from the tcp_info sampler's series (analysis/rfc6349.py):
# bytes not retransmitted over bytes sent; the loaded RTT's excess over the idle one, in
# ms and (on a path with a real idle RTT) as a share of it; the actual transfer time over
# the ideal one (the bottleneck's payload rate).
register(
    _m("tcp_efficiency", "%", "TCP efficiency", "higher"),
    _m("buffer_delay_ms", "ms", "buffer delay", "lower"),
    _m("buffer_delay_pct", "%", "buffer delay %", "lower"),
    _m("transfer_time_ratio", "ratio", "transfer time ratio", "lower"),
)

# RFC 2544 throughput (the throughput kind), each keyed by its frame size ("64", "imix";
# "64 up" and "64 down" beside "64" for each direction of a test of both at once; "64
# 0.5%" for a second loss target): the
# highest rate with no loss (NDR) or loss within a target (PDR), in frames/s and in bit/s
# of whole frames with their FCS, as RFC 2544 counts them.
register(
    _m("ndr_fps", "frames/s", "NDR frames/s", "higher"),
    _m("ndr_bps", "bit/s", "NDR", "higher"),
    _m("pdr_fps", "frames/s", "PDR frames/s", "higher"),
    _m("pdr_bps", "bit/s", "PDR", "higher"),
    # The generator's own ceiling, and 1 where an answer is that ceiling (the path may
    # forward more than was offered), 0 where it is the path's.
    _m("generator_fps", "frames/s", "generator frames/s", "neutral"),
    _m("generator_limited", "flag", "generator-limited", "neutral"),
    # A probe stream's RTT while the NDR runs (RFC 2544 section 26.2): keys "SIZE median"
    # and "SIZE p99".
    _m("ndr_latency_ms", "ms", "latency at NDR", "lower"),
    # A frame size that does not fit the path's MTU (a tunnel's 1420 under 1518-byte
    # frames): that MTU, in bytes; the size has no rate, and says why.
    _m("frame_over_mtu", "B", "does not fit MTU", "neutral"),
    # Trials whose generator sent slower than asked by more than the search's precision
    # (its own frames over its own sending time): not evidence, repeated, counted here.
    _m("invalid_trials", "count", "invalid trials", "lower"),
    # The test frames' own one-way latency at the NDR (hoplab-gen stamps each with its
    # send time; the receiver reads the same clock): keys "SIZE median", "SIZE p99",
    # "SIZE max"; and the share of them that arrived after a later-sent one.
    _m("ndr_one_way_ms", "ms", "one-way latency at NDR", "lower"),
    _m("ndr_out_of_order", "%", "out of order at NDR", "lower"),
    # RFC 2544 section 26.3's frame loss rate: keys "SIZE PCT%" (of the generator's
    # ceiling), the loss and the rate the generator achieved in that trial.
    _m("frame_loss", "%", "frame loss", "lower"),
    _m("frame_loss_offered_fps", "frames/s", "frame loss trial's rate", "neutral"),
    # Section 26.4's back-to-back frames: the longest burst forwarded whole, and the rate
    # the generator sent that burst at.
    _m("back_to_back_frames", "frames", "back-to-back frames", "higher"),
    _m("back_to_back_fps", "frames/s", "back-to-back burst rate", "neutral"),
)

# Responsiveness under working conditions (draft-ietf-ippm-responsiveness; the
# responsiveness kind): round trips per minute, the foreign and self probes' trimmed
# means that make it, the load's goodput per direction (key "up", "down") and the
# draft's confidence (1 low, 2 medium, 3 high).
register(
    _m("rpm", "RPM", "RPM", "higher"),
    _m("rpm_foreign_ms", "ms", "foreign probe RTT", "lower"),
    _m("rpm_self_ms", "ms", "self probe RTT", "lower"),
    _m("rpm_goodput", "bit/s", "RPM load goodput", "higher"),
    _m("rpm_confidence", "level", "RPM confidence", "neutral"),
)



def loss_ratio(sent: float, received: float) -> float:
    """hoplab's one definition of loss, which every figure called loss is computed by:
    packets sent minus packets received over packets sent, from the sender's count (as
    RFC 2544 section 26.3 counts frames offered). A packet the receiver had not seen
    when it stopped counting is lost, wherever it was. Duplicates never make it
    negative; nothing sent lost nothing (0)."""
    if sent <= 0:
        return 0.0
    return max(0.0, sent - received) / sent


def loss_percent(sent: float, received: float) -> float:
    """loss_ratio() in percent: what the metrics `loss`, `loss_up` and `loss_down` hold."""
    return 100 * loss_ratio(sent, received)


# Loss and order (UDP, probes): `loss` is loss_percent() of `packets` (the sender's
# count) and the packets received; `lost_packets` their difference.
register(
    _m("loss", "%", "loss", "lower"),
    _m("loss_up", "%", "loss up", "lower"),
    _m("loss_down", "%", "loss down", "lower"),
    _m("lost_packets", "count", "lost packets", "lower"),
    _m("out_of_order", "count", "reordered", "lower"),
    _m("packets", "count", "packets", "neutral"),
)

# Fairness between sending hosts. A host's share is zero-sum (one host's gain is
# another's loss), so only the index judges.
register(
    _m("jain_index", "index", "Jain", "higher"),
    _m("host_rate", "bit/s", "host rate", "higher"),
    _m("host_share", "%", "host share", "neutral"),
)

# Page loads (the web kind), timed by the browser's Navigation Timing from the
# navigation's start: time to first byte, DOM content loaded, the load event. The bare
# name is the median over the loads that completed; failed loads are counted apart.
# The medians are judged on every load (series web_ttfb, web_dcl, web_load).
register(
    *(MetricDef(f"web_{t}", "ms", text, "lower", samples=f"web_{t}", trial="load")
      for t, text in (("ttfb", "first byte"), ("dcl", "DOM loaded"), ("load", "page load"))),
    *(_m(f"web_{t}{suffix}", "ms", f"{text}{label}", "lower")
      for t, text in (("ttfb", "first byte"), ("dcl", "DOM loaded"), ("load", "page load"))
      for suffix, label in (("_mean", " mean"), ("_p95", " p95"))),
    _m("web_load_stddev", "ms", "page load stddev", "lower"),
    _m("web_bytes", "bytes", "page bytes", "neutral"),
    _m("web_loads", "count", "page loads", "neutral"),
    _m("web_failed", "count", "failed loads", "lower"),
)

# Samplers, over the load phase (samplers/summary.py). CPU shares are work done,
# except idle (spare capacity).
register(
    *(_m(f"cpu.{s}", "%", f"CPU {s}", "lower") for s in ("user", "system", "irq", "softirq",
                                                          "steal")),
    _m("cpu.idle", "%", "CPU idle", "higher"),
    # A device's sampler: its own CPU (the loop, its children, its SSH server process) as
    # a share of one of the device's cores (samplers/device.py).
    _m("sampler.cpu", "%", "sampler CPU", "lower"),
    *(_m(f"iface.{d}_bytes", "bytes", f"{d} bytes", "neutral") for d in ("rx", "tx")),
    *(_m(f"iface.{d}_packets", "packets", f"{d} packets", "neutral") for d in ("rx", "tx")),
    *(_m(f"iface.{d}_bps", "bit/s", f"{d} rate", "neutral") for d in ("rx", "tx")),
    *(_m(f"iface.{d}_pps", "packets/s", f"{d} packets/s", "neutral") for d in ("rx", "tx")),
    *(_m(f"iface.{d}_{what}", "packets", f"{d} {what}", "lower") for d in ("rx", "tx")
      for what in ("drops", "errors")),
    # A qdisc's packets are what the kernel queued: with GSO a super-frame of up to
    # 64 KiB is one (docs/lab-format.md); its bytes say how much that was.
    _m("qdisc.backlog_bytes_max", "bytes", "max backlog bytes", "lower"),
    _m("qdisc.backlog_packets_max", "packets", "max backlog (qdisc pkts)", "lower"),
    _m("qdisc.drops", "packets", "qdisc drops", "lower"),
    _m("qdisc.overlimits", "packets", "overlimits", "lower"),
    _m("qdisc.requeues", "packets", "requeues", "lower"),
    _m("qdisc.sent_bytes", "bytes", "qdisc sent", "neutral"),
    _m("qdisc.sent_packets", "packets", "qdisc sent pkts", "neutral"),
    _m("tcp.retrans_segs", "segments", "TCP retransmitted segments", "lower"),
    _m("tcp.lost_retransmit", "segments", "TCP lost retransmits", "lower"),
    # A TCP flow's own state on its sender (the tcp_info sampler, samplers/tcp_info.py):
    # series per flow, and per flow their median over the load phase (min_rtt: the least;
    # retrans and bytes: their increase), samplers/summary.py.
    _m("tcp.cwnd", "segments", "cwnd", "neutral"),
    _m("tcp.srtt", "ms", "smoothed RTT", "lower"),
    _m("tcp.rttvar", "ms", "RTT variance", "lower"),
    _m("tcp.min_rtt", "ms", "TCP min RTT", "lower"),
    _m("tcp.pacing_rate", "bit/s", "pacing rate", "neutral"),
    _m("tcp.delivery_rate", "bit/s", "delivery rate", "higher"),
    _m("tcp.retrans", "segments", "TCP retransmits (tcp_info)", "lower"),
    _m("tcp.bytes_sent", "bytes", "TCP bytes sent", "neutral"),
    _m("tcp.bytes_retrans", "bytes", "TCP bytes retransmitted", "lower"),
    # hoplab-wire: what it drops for its configured loss or duplicates is the
    # impairment asked for; what it drops because its queue is full is a verdict.
    _m("wire.passed", "frames", "wire passed", "neutral"),
    _m("wire.dropped_loss", "frames", "wire dropped (loss)", "neutral"),
    _m("wire.dropped_queue", "frames", "wire dropped (queue full)", "lower"),
    _m("wire.dropped_malformed", "frames", "wire dropped (malformed)", "lower"),
    _m("wire.duplicated", "frames", "wire duplicated", "neutral"),
    _m("wire.queue_bytes_max", "bytes", "wire max queue", "lower"),
    _m("wire.held_bytes_max", "bytes", "wire max in flight", "neutral"),
    # Its queue discipline (codel, fq_codel, sfq): AQM drops, ECN marks, flows, rehashes.
    # The wire's queue counts wire-size frames (a super-frame as the segments it stands
    # for); its passed and dropped counts, the frames it read (a super-frame is one).
    _m("wire.queue_packets_max", "packets", "wire max queue (frames)", "lower"),
    _m("wire.dropped_aqm", "frames", "wire AQM drops", "neutral"),
    _m("wire.ecn_marked", "frames", "wire ECN marks", "neutral"),
    _m("wire.ce_marked", "frames", "wire CE marks (ce_threshold)", "neutral"),
    _m("wire.flows_active_max", "flows", "wire max flows", "neutral"),
    _m("wire.rehashes", "count", "wire SFQ rehashes", "neutral"),
)

# Profiles: the share of perf samples per category (profile/categories.toml).
register(_m("profile.", "%", "profile {}", "neutral"))
