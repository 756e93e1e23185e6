"""A finished flow's output -> series and per-flow metrics, on the run's clock.

Alignment: iperf3 reports intervals from its own test start, which comes after its
control connection, parameter exchange and stream connects (from a few ms to a
quarter of a second after its client started, when another flow fills the queue
they cross), and only in whole seconds of Unix time. So a flow's intervals are
placed from when its data began to move (its sender's first data write, seen by
hoplab.run.procs), or else by the end of its test: the time its client wrote its
report less the test's length as iperf3 measured it (clock_start). ping -D and irtt
report Unix times per packet, shifted by clock zero. Latencies are kept in
milliseconds, rates in bit/s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hoplab.analysis.stats import mean, mean_abs_diff, percentile
from hoplab.errors import HoplabError
from hoplab.kinds import registry
from hoplab.record import Metric, RawOutput, Series
from hoplab.run.flows import Outcome
from hoplab.run.procs import Proc
from hoplab.spec.experiment import Flow
from hoplab.tools import iperf3, irtt, ping


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


def in_window(t: Sequence[float], v: Sequence[float], window: tuple[float, float]
              ) -> list[float]:
    lo, hi = window
    return [x for s, x in zip(t, v, strict=True) if lo - 1e-9 <= s <= hi + 1e-9]


# How long after its test's last interval ended iperf3's client has written its report
# (the results exchange with the server, then the JSON): 2.5-8 ms on an idle lab. More
# when the exchange waits in a queue other flows keep full (up to their queueing delay,
# 120-190 ms for four TCP flows through the 50 Mbit/s HTB of tests/lab/test_runs.py),
# so the report's time is used only when the data's start was not seen.
REPORT_DELAY_S = 0.005


def clock_start(res: iperf3.Result, launched: float, data: float | None,
               done: float | None) -> float:
    """When an iperf3 test's clock started, on the run clock (all three arguments are too).

    iperf3 starts its clock when every stream is connected, a few ms to half a second
    after its client was `launched` (the control connection, the parameters and the
    connects each cross the queues other flows fill), and its report has only whole
    seconds of it. Its sender writes its first data within a round trip of that
    start: `data`, when the flow's processes were watched (hoplab.run.procs). Else the
    report's time `done` less the test's length as iperf3 measured it (its client or
    server, whichever counted longer) and the exchange that follows. Never before
    `launched`; that alone is the answer when neither is known."""
    if data is not None:
        return max(launched, data)
    length = max((i.end for r in (res, res.server) if r is not None for s in r.streams
                  for i in s.intervals), default=0.0)
    if done is None or length <= 0:
        return launched
    return max(launched, done - REPORT_DELAY_S - length)


def client_lag(res: iperf3.Result) -> float:
    """How much later than the server's the client's clock started: the server starts
    its own as it sends the word to start, the client when that word arrives (behind
    the queue a download fills). Both stop when the client's time is up: the client at
    once, the server when the client's word reaches it, a moment later where the
    client's direction is not queued, so the server counted longer by about the lag.
    Zero without the server's report."""
    if res.server is None:
        return 0.0
    client, server = (max((i.end for s in r.streams for i in s.intervals), default=0.0)
                      for r in (res, res.server))
    return max(0.0, server - client) if client > 0 and server > 0 else 0.0


def _bulk(out: Outcome, text: str, launched: float, window: tuple[float, float],
          data: float | None = None, done: float | None = None) -> None:
    """A bulk flow's series and figures. `launched`, `data` and `done` (run clock): when
    its client started, its data began to move and its report was written; its
    intervals are placed from clock_start()."""
    f = out.flow
    res = iperf3.parse(text)
    out.bulk = res
    # The server's clock start; the client's intervals (what a download receives) are
    # on the client's clock, `lag` later.
    offset = clock_start(res, launched, data, done)
    lag = client_lag(res)
    # The receiver's own time span: it goes on receiving what sat in the queues after
    # the sender stopped (a full 1000-packet FIFO at 50 Mbit/s holds 0.24 s).
    if res.received_bps > 0:
        start = offset + (lag if res.reverse else 0.0)
        out.span = (start, start + 8 * res.received_bytes / res.received_bps)
    if res.error:
        out.error = f"flow {f.name}: iperf3: {res.error}"
    # Receiver-side intervals (the server's, via --get-server-output, for uploads) are
    # goodput; the sender's count what was written into the socket. Fall back to the
    # sender's for streams whose receiver's are missing (a server that died,
    # or an output taken without --get-server-output).
    upward = {s.id: s.sender for s in res.streams}
    # Each stream's series, and whether it is the client's own (its receiving streams',
    # or its sending ones' in the fallback), so on the client's clock.
    per_stream = {sid: (pair, upward.get(sid) is False)
                  for sid, pair in iperf3.throughput_series(res, received=True).items()}
    for sid, pair in iperf3.throughput_series(res, received=False).items():
        per_stream.setdefault(sid, (pair, upward.get(sid) is True))
    groups: dict[str | None, dict[float, float]] = {}
    for sid, ((ts, vs), on_client) in per_stream.items():
        key = ("up" if upward.get(sid, True) else "down") if f.direction == "bidir" else None
        acc = groups.setdefault(key, {})
        shift = lag if on_client else 0.0
        for t, v in zip(ts, vs, strict=True):
            when = round(t + shift, 3)
            acc[when] = acc.get(when, 0.0) + v
    for key, acc in sorted(groups.items(), key=lambda kv: str(kv[0])):
        times = sorted(acc)
        at = [offset + x for x in times]
        rates = [acc[x] for x in times]
        out.series.append(Series("throughput", "bit/s", at, rates, flow=f.name, key=key))
        if key is None:
            out.metrics += rate_metrics(in_window(at, rates, window), f.name)
    # A --bidir flow's figures count both directions, as its series do; each direction
    # also has its own goodput (goodput_reverse is goodput_down's older name, kept).
    legs: list[iperf3.Result | iperf3.Totals] = [res]
    if f.direction == "bidir" and res.bidir_reverse is not None:
        legs.append(res.bidir_reverse)
        down = res.bidir_reverse.received_bps
        out.metrics += [Metric("goodput_up", res.received_bps, "bit/s", flow=f.name),
                        Metric("goodput_down", down, "bit/s", flow=f.name),
                        Metric("goodput_reverse", down, "bit/s", flow=f.name)]
    out.metrics += [
        Metric("goodput", math.fsum(x.received_bps for x in legs), "bit/s", flow=f.name),
        Metric("sent_rate", math.fsum(x.sent_bps for x in legs), "bit/s", flow=f.name),
        Metric("bytes_received", float(sum(x.received_bytes for x in legs)), "bytes",
               flow=f.name)]
    retrans = [x.retransmits for x in legs if x.retransmits is not None]
    if retrans:
        out.metrics.append(Metric("retransmits", float(sum(retrans)), "count", flow=f.name))
    if res.protocol.upper() == "UDP":
        for name, value, unit in _udp_figures(legs):
            if value is not None:
                out.metrics.append(Metric(name, float(value), unit, flow=f.name))


def _udp_figures(legs: Sequence[iperf3.Result | iperf3.Totals]
                 ) -> list[tuple[str, float | None, str]]:
    """Loss, jitter and order at the receivers of one UDP flow's directions: iperf3's own
    figures for one, counts added and jitter weighted by packets for both (--bidir)."""
    if len(legs) == 1:
        r = legs[0]
        return [("loss", r.lost_percent, "%"),
                ("udp_jitter", None if r.jitter_s is None else r.jitter_s * 1000, "ms"),
                ("out_of_order", r.out_of_order, "count"),
                ("lost_packets", r.lost_packets, "count"), ("packets", r.packets, "count")]
    packets = sum(x.packets or 0 for x in legs)
    lost = sum(x.lost_packets or 0 for x in legs)
    weights = [(x.jitter_s, x.packets or 0) for x in legs if x.jitter_s is not None]
    weight = sum(n for _, n in weights)
    return [("loss", 100 * lost / packets if packets else None, "%"),
            ("udp_jitter", 1000 * math.fsum(j * n for j, n in weights) / weight
             if weight else None, "ms"),
            ("out_of_order", float(sum(x.out_of_order or 0 for x in legs)), "count"),
            ("lost_packets", float(lost), "count"), ("packets", float(packets), "count")]


def _spikes(out: Outcome, rtt: Series) -> None:
    # numpy is imported here, not at the top: listing runs loads the kinds, which load
    # this module, and need none of it.
    from hoplab.analysis.spikes import spike_figures

    more_metrics, more_series = spike_figures(rtt)
    out.metrics += more_metrics
    out.series += more_series


def _ping(out: Outcome, text: str, t0: float) -> None:
    res = ping.parse(text)
    answered = [r for r in res.replies if r.rtt_s is not None]
    out.rtt_t = [r.t_unix - t0 for r in answered]
    out.rtt_ms = [(r.rtt_s or 0.0) * 1000 for r in answered]
    lost = [r.t_unix - t0 for r in res.replies if r.rtt_s is None]
    rtt = Series("rtt", "ms", out.rtt_t, out.rtt_ms, flow=out.flow.name)
    out.series.append(rtt)
    _spikes(out, rtt)
    if lost:
        out.series.append(Series("lost", "count", lost, [1.0] * len(lost), flow=out.flow.name))
    out.metrics += latency_metrics(out.rtt_ms, out.flow.name)
    out.metrics += [Metric("loss", res.loss_pct, "%", flow=out.flow.name),
                    Metric("packets", float(res.sent), "count", flow=out.flow.name)]
    if res.sent == 0:
        out.error = f"flow {out.flow.name}: ping sent nothing"


def _probe(out: Outcome, text: str, t0: float) -> None:
    res = irtt.parse(text)
    name = out.flow.name
    answered = [s for s in res.samples if s.rtt_s is not None]
    out.rtt_t = [s.t_unix - t0 for s in answered]
    out.rtt_ms = [(s.rtt_s or 0.0) * 1000 for s in answered]
    rtt = Series("rtt", "ms", out.rtt_t, out.rtt_ms, flow=name)
    out.series.append(rtt)
    _spikes(out, rtt)
    for attr, key in (("send_delay_s", "owd_up"), ("receive_delay_s", "owd_down"),
                      ("ipdv_s", "ipdv")):
        pts = [(s.t_unix - t0, getattr(s, attr) * 1000) for s in answered
               if getattr(s, attr) is not None]
        if pts:
            out.series.append(Series(key, "ms", [p[0] for p in pts], [p[1] for p in pts],
                                     flow=name))
            values = [p[1] for p in pts]
            if key == "ipdv":
                out.metrics.append(Metric("ipdv_mean", mean([abs(x) for x in values]), "ms",
                                          flow=name))
            else:
                out.metrics.append(Metric(f"{key}_median", percentile(values, 50), "ms",
                                          flow=name))
    out.metrics += latency_metrics(out.rtt_ms, name)
    out.metrics += [Metric("loss", res.loss_pct, "%", flow=name),
                    Metric("packets", float(res.packets_sent), "count", flow=name)]
    for attr, metric in (("upstream_loss_pct", "loss_up"), ("downstream_loss_pct", "loss_down")):
        value = getattr(res, attr)
        if value is not None:
            out.metrics.append(Metric(metric, value, "%", flow=name))


def collect(flow: Flow, proc: Proc, t0: float, window: tuple[float, float]) -> Outcome:
    """The flow's outcome from its client's output, parsed as its kind (hoplab.kinds) says."""
    tool = registry.flow_tool(flow.kind)
    out = Outcome(flow)
    data = proc.output()
    # Named by the flow's tool, not its argv[0] (a web flow's is hoplab's Python).
    out.raw.append(RawOutput(f"{flow.name} {tool.tool}", data, tool.media_type))
    stderr = proc.errors()
    if stderr:
        out.raw.append(RawOutput(f"{flow.name} {tool.tool} stderr", stderr.encode()))
    try:
        tool.collect(out, data.decode("utf-8", errors="replace"), t0, proc.times(), window)
    except HoplabError as e:
        out.error = f"flow {flow.name}: {e}" + (f" ({stderr})" if stderr else "")
    return out
