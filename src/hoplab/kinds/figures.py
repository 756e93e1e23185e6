"""Figures from the flows' outcomes: a flow's latency and rate figures, and the
whole test's totals, latency under load and fairness.

Summed throughput is the per-flow series added on one 0.2 s grid. Latency
under load (rrul) pools every ping and probe RTT by phase: the median of the
load phase against the median of the idle phases. Per-host fairness compares
what each sending host got while every host was sending.

Each test kind chooses its figures with figures(): these are the building blocks;
run_figures() asks the test's kind.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from hoplab import kind_registry as registry
from hoplab.analysis import levels
from hoplab.analysis.stats import (
    binned_sum,
    bufferbloat_grade,
    jain_index,
    mean,
    mean_abs_diff,
    median,
    percentile,
)
from hoplab.kinds.flow import REPORT_STEP_S, Outcome
from hoplab.metrics import loss_percent
from hoplab.record import Metric, Series
from hoplab.spec.experiment import Test
from hoplab.tools import iperf3


def latency_metrics(values_ms: Sequence[float], flow: str | None) -> list[Metric]:
    if not values_ms:
        return []
    out = [Metric(f"rtt_{name}", percentile(values_ms, q), "ms", flow=flow)
           for name, q in (("min", 0), ("median", 50), ("p95", 95), ("p99", 99), ("max", 100))]
    out.append(Metric("rtt_mean", mean(values_ms), "ms", flow=flow))
    jitter = mean_abs_diff(values_ms)
    if not math.isnan(jitter):
        out.append(Metric("rtt_jitter", jitter, "ms", flow=flow))
    return out


def rate_metrics(values: Sequence[float], flow: str | None) -> list[Metric]:
    if not values:
        return []
    return [Metric("throughput_mean", mean(values), "bit/s", flow=flow),
            *[Metric(f"throughput_{n}", percentile(values, q), "bit/s", flow=flow)
              for n, q in (("median", 50), ("p5", 5), ("p95", 95))]]


def udp_metrics(legs: Sequence[iperf3.Result | iperf3.Totals], flow: str | None
                ) -> list[Metric]:
    """Loss, jitter and order of UDP directions (a flow's one or two, or a run's all):
    datagrams counted by their senders and receivers, added over the directions, loss
    by hoplab's one definition (loss_percent); jitter is iperf3's
    (RFC 3550, at the receiver), each direction's weighted by the datagrams it received.
    Nothing when no direction has counts."""
    counts = [(x, c) for x in legs if (c := iperf3.datagrams(x)) is not None]
    if not counts:
        return []
    sent = sum(c[0] for _, c in counts)
    received = sum(c[1] for _, c in counts)
    out = [Metric("loss", loss_percent(sent, received), "%", flow=flow)]
    jitter = [(x.jitter_s, c[1]) for x, c in counts if x.jitter_s is not None]
    weight = sum(n for _, n in jitter)
    if weight:
        out.append(Metric("udp_jitter", 1000 * math.fsum(j * n for j, n in jitter) / weight,
                          "ms", flow=flow))
    out += [Metric("out_of_order", float(sum(x.out_of_order or 0 for x, _ in counts)),
                   "count", flow=flow),
            Metric("lost_packets", float(max(0, sent - received)), "count", flow=flow),
            Metric("packets", float(sent), "count", flow=flow)]
    return out


def in_window(t: Sequence[float], v: Sequence[float], window: tuple[float, float]
              ) -> list[float]:
    lo, hi = window
    return [x for s, x in zip(t, v, strict=True) if lo - 1e-9 <= s <= hi + 1e-9]


def rtt_series(out: Outcome, t: list[float], rtt_ms: list[float]) -> None:
    """A flow's answered round trips (run clock, ms): kept for the test's figures, and its
    RTT series with the spikes in it."""
    # numpy is imported here, not at the top: listing runs loads the kinds, which load
    # this module, and need none of it.
    from hoplab.analysis.spikes import spike_figures

    out.rtt_t, out.rtt_ms = t, rtt_ms
    rtt = Series("rtt", "ms", t, rtt_ms, flow=out.flow.name)
    out.series.append(rtt)
    more_metrics, more_series = spike_figures(rtt)
    out.metrics += more_metrics
    out.series += more_series

# One direction of one flow with iperf3's totals for it: an up or down flow has one leg,
# a --bidir flow two (its main direction is up, client -> server; the reverse is down).
Leg = tuple[Outcome, str, iperf3.Result | iperf3.Totals]


def _legs(outcomes: Sequence[Outcome]) -> list[Leg]:
    legs: list[Leg] = []
    for o in outcomes:
        if o.bulk is None:
            continue
        if o.flow.direction != "bidir":
            legs.append((o, o.flow.direction, o.bulk))
            continue
        legs.append((o, "up", o.bulk))
        if o.bulk.bidir_reverse is not None:
            legs.append((o, "down", o.bulk.bidir_reverse))
    return legs


def _goodput(legs: Sequence[Leg]) -> float:
    """Bytes received in every leg over the time from the first one's data to the last
    one's end. Adding each flow's own rate would overstate it: flows that start apart
    count their bytes over windows that do not coincide. Each leg's receiver counted
    from its test's start (a UDP leg's from its first datagram) to its end, placed on
    the run clock by hoplab.kinds.tcp.collect_bulk (Outcome.received)."""
    spans = [o.received[way] for o, way, _ in legs if way in o.received]
    if not spans:
        return 0.0
    total = math.fsum(n for _, _, n in spans)
    width = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
    return 8 * total / width if width > 0 else 0.0


def _totals(test: Test, outcomes: Sequence[Outcome], end: float, by_direction: bool
            ) -> tuple[list[Series], list[Metric]]:
    series: list[Series] = []
    metrics: list[Metric] = []
    bulk = [o for o in outcomes if o.flow.bulk and o.bulk is not None]
    if not bulk:
        return series, metrics
    window = (test.load.start_s, test.load.end_s)
    legs = _legs(bulk)
    groups: dict[str | None, list[Leg]] = {None: legs}
    if by_direction or any(o.flow.direction != "up" for o in bulk):
        for d in ("up", "down"):
            groups[d] = [leg for leg in legs if leg[1] == d]
    for key, group in groups.items():
        if not group:
            continue
        flows = list({id(o): o for o, _, _ in group}.values())
        # Each flow's intervals start when its test started (its span), not a whole
        # step before the first interval's end: iperf3's first interval runs a little long.
        # A --bidir flow's series are per direction (key); the others' have no key.
        flows_series = [(s, o.span[0] if o.span else None) for o in flows for s in o.series
                        if s.name == "throughput" and (key is None or s.key in (key, None))]
        t, v = binned_sum([(s.t, s.v) for s, _ in flows_series], REPORT_STEP_S, end,
                          [start for _, start in flows_series])
        series.append(Series("throughput", "bit/s", t, v, key=key))
        suffix = "" if key is None else f"_{key}"
        rates = _bins_within(t, v, window)
        metrics += [Metric(m.name + suffix, m.value, m.unit) for m in rate_metrics(rates, None)]
        metrics.append(Metric("goodput" + suffix, _goodput(group), "bit/s"))
        if key is None:
            metrics.append(Metric("sent_rate", math.fsum(leg.sent_bps for _, _, leg in group),
                                  "bit/s"))
            retrans = [leg.retransmits for _, _, leg in group if leg.retransmits is not None]
            if retrans:
                metrics.append(Metric("retransmits", float(sum(retrans)), "count"))
            udp = [leg for o, _, leg in group if o.bulk and o.bulk.protocol.upper() == "UDP"]
            # The run's: the same figures as a flow's, over every UDP direction.
            metrics += [m for m in udp_metrics(udp, None)
                        if m.name in ("loss", "udp_jitter", "out_of_order")]
    return series, metrics


def _bins_within(t: Sequence[float], v: Sequence[float], window: tuple[float, float]
                 ) -> list[float]:
    """The grid's bins that lie inside the window. A bin is labelled by its end: the one
    ending where the window starts covers the step before it (the idle phase before
    rrul's load), which made the load's mean a bin too long and 1 % low."""
    lo, hi = window
    return [x for end, x in zip(t, v, strict=True)
            if lo - 1e-9 <= end - REPORT_STEP_S and end <= hi + 1e-9]


def _probes(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if registry.flow_tool(o.flow.kind).rtt]


def _latency(outcomes: Sequence[Outcome], pool: Literal["always", "single"], loss: bool
             ) -> list[Metric]:
    probes = _probes(outcomes)
    if not probes:
        return []
    pooled = [v for o in probes for v in o.rtt_ms]
    metrics = latency_metrics(pooled, None) if pool == "always" or len(probes) == 1 else []
    counted = [o.packets for o in probes if o.packets is not None]
    sent = sum(s for s, _ in counted)
    if sent and loss:
        metrics.append(Metric("loss", loss_percent(sent, sum(r for _, r in counted)), "%"))
    return metrics


def phase_latency(test: Test, outcomes: Sequence[Outcome]
                  ) -> tuple[list[Metric], dict[str, str]]:
    """Latency under load: every RTT pooled by phase, the load's median against the idle
    phases', and the bufferbloat grade of the difference (a note)."""
    idle: list[float] = []
    load: list[float] = []
    load_t: list[float] = []
    for o in _probes(outcomes):
        for t, v in zip(o.rtt_t, o.rtt_ms, strict=True):
            phase = next((p.name for p in test.phases if p.start_s <= t < p.end_s), None)
            if phase == "load":
                load.append(v)
                load_t.append(t)
            elif phase is not None:
                idle.append(v)
    if not (idle and load):
        return [], {}
    increase = median(load) - median(idle)
    notes = {"grade": bufferbloat_grade(increase)}
    two = levels.step(load_t, load)
    if two is not None:
        # The path changed under the load: its median lies between the two levels.
        notes["load_levels"] = (f"{two.before:.1f} ms, then {two.after:.1f} ms from "
                                f"{two.at_s - test.load.start_s:.1f} s into the load")
    return [Metric("latency_idle", median(idle), "ms"),
            Metric("latency_load", median(load), "ms"),
            Metric("latency_load_p95", percentile(load, 95), "ms"),
            Metric("latency_increase", increase, "ms")], notes


def fairness(test: Test, outcomes: Sequence[Outcome]) -> tuple[list[Metric], dict[str, str]]:
    """Per-host fairness between the hosts that send: Jain's index of their rates while
    every one of them was sending, and each host's rate and share."""
    return _fairness(outcomes), {}


def _fairness(outcomes: Sequence[Outcome]) -> list[Metric]:
    bulk = [o for o in outcomes if o.flow.bulk and o.bulk is not None and o.flow.duration_s]
    hosts = sorted({o.flow.sender for o in bulk})
    if len(hosts) < 2:
        return []
    # The window where every host has a flow running: outside it, one host alone is not
    # unfairness.
    starts = {h: min(o.flow.start_s for o in bulk if o.flow.sender == h) for h in hosts}
    ends = {h: max(o.flow.end_s or 0.0 for o in bulk if o.flow.sender == h) for h in hosts}
    lo, hi = max(starts.values()), min(ends.values())
    if hi - lo < REPORT_STEP_S * 2:
        return []
    rates = {}
    for h in hosts:
        # A host's rate is the sum of its flows' mean rates over the shared window (the
        # first 0.5 s left out: slow start is not a share).
        rates[h] = math.fsum(
            _mean(in_window(s.t, s.v, (lo + 0.5, hi)))
            for o in bulk if o.flow.sender == h for s in o.series if s.name == "throughput")
    total = math.fsum(rates.values())
    out = [Metric("jain_index", jain_index(list(rates.values())), "index")]
    out += [Metric("host_rate", rates[h], "bit/s", node=h) for h in hosts]
    if total > 0:
        out += [Metric("host_share", 100 * rates[h] / total, "%", node=h) for h in hosts]
    return out


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


Figures = tuple[list[Series], list[Metric], dict[str, str]]
# A figure of a kind's own: (test, outcomes) -> whole-run metrics and notes.
Step = Callable[[Test, Sequence[Outcome]], tuple[list[Metric], dict[str, str]]]


def figures(*, by_direction: bool = False, pool: Literal["always", "single"] = "always",
            probe_loss: bool = False, steps: Sequence[Step] = ()
            ) -> Callable[[Test, Sequence[Outcome], float], Figures]:
    """A kind's figures: summed throughput and goodput of its bulk flows (per direction
    too when `by_direction` or any flow is not an upload), its probes' RTTs pooled
    (`pool` "single": only when there is one probe flow, since RTTs to different
    targets do not pool), their loss when `probe_loss`, then `steps` in order."""
    def compute(test: Test, outcomes: Sequence[Outcome], end: float) -> Figures:
        series, metrics = _totals(test, outcomes, end, by_direction)
        metrics += _latency(outcomes, pool, probe_loss)
        notes: dict[str, str] = {}
        for step in steps:
            more, more_notes = step(test, outcomes)
            metrics += more
            notes.update(more_notes)
        return series, metrics, notes
    return compute


def run_figures(test: Test, outcomes: Sequence[Outcome], end: float) -> Figures:
    return registry.get(test.kind).figures(test, outcomes, end)
