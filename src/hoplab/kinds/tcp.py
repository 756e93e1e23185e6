"""tcp: bulk TCP with iperf3, one or more flows, up, down (-R) or both ways (--bidir).

Each flow gets a one-off iperf3 server of its own (iperf3 serves one test at a
time) and reports every 0.2 s, from the receiver where it can (the server's
intervals, via --get-server-output, for uploads).

Alignment: iperf3 reports intervals from its own test start, which comes after its
control connection, parameter exchange and stream connects (from a few ms to a
quarter of a second after its client started, when another flow fills the queue
they cross), and only in whole seconds of Unix time. So a flow's intervals are
placed from when its data began to move (its sender's first data write, seen by
hoplab.run.procs), or else by the end of its test: the time its client wrote its
report less the test's length as iperf3 measured it (clock_start). Rates are in bit/s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hoplab.kind_registry import (
    DEFAULT_DURATION_S,
    FlowTool,
    Kind,
    Option,
    Reader,
    register,
)
from hoplab.kinds.figures import figures, in_window, rate_metrics, udp_metrics
from hoplab.kinds.flow import REPORT_STEP_S, ClientTimes, Outcome, Server, address
from hoplab.lab.plan import Plan
from hoplab.record import Metric, Series
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import DIRECTIONS, Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import choice, parse_rate, parse_size
from hoplab.tools import iperf3

IPERF3_BASE_PORT = 5201

OPTIONS: dict[str, Option] = {
    "flows": Option(ov.flows, "parallel flows (at most 128, as iperf3's `-P`), each its "
                              "own iperf3 client and server (`NAME.1`, `NAME.2`...)", "1"),
    "direction": Option(choice(DIRECTIONS), "`up`: from sends to to; `down`: to sends to "
                                            "from (`iperf3 -R`); `bidir`: both at once "
                                            "(`--bidir`)", '`"up"`'),
    "duration": Option(ov.whole_seconds, "whole seconds (iperf3 reads `-t` as an integer)",
                       '`"10s"`'),
    "bytes": Option(parse_size, "send this many bytes instead (`-n`); not with duration"),
    "cport": Option(ov.port, (
        "client port of the first flow; flow i uses cport + i - 1 (`--cport`), so the "
        "last must be at most 65535. Seed 003 "
        "pins the source port so that RSS hashes each flow to its own core. A port inside "
        "the ephemeral range (32768-60999) may already have been given to another "
        "connection (iperf3's own control connection: \"Address already in use\", seen "
        "once in CI); reserve the pinned ports on the client node, `sysctls = { "
        "\"net.ipv4.ip_local_reserved_ports\" = \"50001-50004\" }`, as "
        "`examples/router.toml` and `examples/devices/whle-router.toml` do")),
    "affinity": Option(ov.affinity, "`\"N\"` (client core) or `\"N,M\"` (client and server "
                                    "core) for `iperf3 -A`; an array is cycled over the "
                                    "flows: `[\"0,0\", \"1,1\"]`"),
    "congestion": Option(ov.congestion, "congestion control (`-C`): `\"cubic\"`, "
                                        "`\"reno\"`, `\"bbr\"`...; one the kernel of "
                                        "each end has (its "
                                        "`tcp_available_congestion_control`)",
                         "system default"),
    "tos": Option(ov.tos, "TOS byte (`-S`): `16` or `\"0x10\"`"),
    "rate": Option(parse_rate, "pacing rate per flow (`-b`)", "unlimited"),
    "length": Option(parse_size, "write size (`-l`)", "iperf3 default"),
    "family": Option(ov.family, "4 or 6: iperf3 connects to `to`'s IPv6 address (`-6`), on "
                                "namespaces and devices alike", "4"),
}

# Figures a bulk flow gives, per flow and for the run (docs/data-format.md).
BULK_METRICS = ("goodput", "goodput_up", "goodput_down", "goodput_reverse", "sent_rate",
                "bytes_received", "retransmits", "throughput_mean", "throughput_median",
                "throughput_p5", "throughput_p95", "throughput_mean_up",
                "throughput_median_up", "throughput_p5_up", "throughput_p95_up",
                "throughput_mean_down", "throughput_median_down", "throughput_p5_down",
                "throughput_p95_down")


@dataclass(frozen=True)
class IperfOptions:
    """A tcp or udp flow's own options: one flow's client port and affinity (the test's
    are the first port and a cycle)."""

    bytes: int | None = None
    rate_bps: int | None = None
    length: int | None = None
    cport: int | None = None
    affinity: str | None = None
    congestion: str | None = None
    tos: int | None = None


def bulk_flows(name: str, kind: str, src: str, dst: str, o: dict[str, Any],
               default_rate: int | None = None) -> list[Flow]:
    """The flows of a tcp or udp test: `flows` of them, each a client port and an
    affinity of its own when asked (seed 003 pins each to a core)."""
    count = o.get("flows", 1)
    affinity: tuple[str, ...] = o.get("affinity", ())
    nbytes = o.get("bytes")
    duration = None if nbytes is not None else o.get("duration", DEFAULT_DURATION_S)
    return [Flow(
        name=f"{name}.{i + 1}" if count > 1 else name, kind=kind, src=src, dst=dst,
        start_s=o.get("start", 0.0), duration_s=duration,
        direction=o.get("direction", "up"), family=o.get("family", 4),
        options=IperfOptions(
            bytes=nbytes, rate_bps=o.get("rate", default_rate), length=o.get("length"),
            cport=o["cport"] + i if "cport" in o else None,
            affinity=affinity[i % len(affinity)] if affinity else None,
            congestion=o.get("congestion"), tos=o.get("tos")))
        for i in range(count)]


def one_length(r: Reader, o: dict[str, Any], path: Path) -> None:
    """A bulk flow runs for a time or until it has sent a count of bytes."""
    if "duration" in o and "bytes" in o:
        r.ctx.fail((*path, "bytes"), "give duration or bytes, not both")


def ports_fit(r: Reader, o: dict[str, Any], path: Path) -> None:
    """Flow i's client port is cport + i - 1: the last one is a port too."""
    count = o.get("flows", 1)
    if "cport" in o and o["cport"] + count - 1 > 65535:
        r.ctx.fail((*path, "cport"), f"cport {o['cport']} and {count} flows need ports up to "
                                     f"{o['cport'] + count - 1}; the last port is 65535")


def _server(flow: Flow, index: int, plan: Plan) -> Server:
    port = IPERF3_BASE_PORT + index
    return Server(flow.dst, "tcp", port, iperf3.server_argv(port))


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


@dataclass(frozen=True)
class Received:
    """What one direction's receiver counted: its bytes, and the span of its own clock
    they arrived in (seconds from its test's start; see udp_first_datagram)."""

    bytes: int
    first: float
    last: float

    @property
    def goodput(self) -> float:
        return 8 * self.bytes / (self.last - self.first) if self.last > self.first else 0.0


def received(res: iperf3.Result, direction: str) -> dict[str, Received]:
    """Each direction of a flow that moves data ("up", "down"; both for a --bidir flow)
    by what its receiver counted. A TCP receiver's bytes span its whole test (its ramp is
    part of its time); a UDP receiver's start at its first datagram."""
    legs = ([("up", res), ("down", res.bidir_reverse)] if direction == "bidir"
            else [(direction, res)])
    udp = res.protocol.upper() == "UDP"
    out: dict[str, Received] = {}
    for way, leg in legs:
        if leg is None or leg.received_bps <= 0:
            continue
        # The receiver goes on counting what sat in the queues after the sender stopped
        # (a full 1000-packet FIFO at 50 Mbit/s holds 0.24 s).
        seconds = 8 * leg.received_bytes / leg.received_bps
        first = (udp_first_datagram(iperf3.received_steps(res, upward=way == "up"), seconds,
                                    leg.received_bytes) if udp else 0.0)
        out[way] = Received(leg.received_bytes, first, seconds)
    return out


def udp_first_datagram(steps: Sequence[tuple[float, float, int]], seconds: float,
                       nbytes: int) -> float:
    """When a UDP receiver's data began, on its clock (`steps`: its report intervals;
    `seconds` and `nbytes`: what it counted in all).

    Its test's clock does not start with its data, and not alike both ways: an upload's
    receiver (the server) starts its clock as it sends the word to start, and the
    client's first datagram reaches it a round trip later (70 ms on a 70 ms path, 2.3 %
    of a 3 s test); a download's receiver (the client) starts its clock as that word
    arrives, its data right behind it. A UDP sender sends at its rate from its first
    datagram, so the first interval, which holds that wait, is counted at the rate of
    the others: the data began nbytes / that rate before the clock's end. A shaper's
    burst in the first interval puts that before 0, so the burst too counts at the
    link's rate. 0 when there are fewer than two intervals."""
    if len(steps) < 2:
        return 0.0
    _, first_end, first_bytes = steps[0]
    rest_time, rest_bytes = seconds - first_end, nbytes - first_bytes
    if rest_time <= 0 or rest_bytes <= 0:
        return 0.0
    return seconds - nbytes * rest_time / rest_bytes


def collect_bulk(out: Outcome, text: str, launched: float, window: tuple[float, float],
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
    # The receiver's clock (the main direction's; a --bidir flow's two are taken as one):
    # where its intervals begin.
    start = offset + (lag if res.reverse else 0.0)
    if res.received_bps > 0:
        out.span = (start, start + 8 * res.received_bytes / res.received_bps)
    ways = received(res, f.direction)
    for way, got in ways.items():
        out.received[way] = (start + got.first, start + got.last, got.bytes)
    if res.error:
        out.error = f"flow {f.name}: iperf3: {res.error}"
    for key, acc in sorted(_rates(res, f.direction, lag).items(), key=lambda kv: str(kv[0])):
        times = sorted(acc)
        at = [offset + x for x in times]
        rates = [acc[x] for x in times]
        out.series.append(Series("throughput", "bit/s", at, rates, flow=f.name, key=key))
        if key is None:
            out.metrics += rate_metrics(in_window(at, rates, window), f.name)
    out.metrics += _totals(res, f.name, f.direction, ways)


def _rates(res: iperf3.Result, direction: str, lag: float
           ) -> dict[str | None, dict[float, float]]:
    """The flow's rates by interval end (its test's clock), added over its streams: one
    group, or one per direction of a --bidir flow ("up", "down")."""
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
        key = ("up" if upward.get(sid, True) else "down") if direction == "bidir" else None
        acc = groups.setdefault(key, {})
        shift = lag if on_client else 0.0
        for t, v in zip(ts, vs, strict=True):
            when = round(t + shift, 3)
            acc[when] = acc.get(when, 0.0) + v
    return groups


def _totals(res: iperf3.Result, flow: str, direction: str, ways: dict[str, Received]
            ) -> list[Metric]:
    """The flow's own totals from iperf3's report; its goodput from what its receivers
    counted (`ways`, received()). A --bidir flow's figures count both directions, as its
    series do; each direction also has its own goodput (goodput_reverse is
    goodput_down's older name, kept)."""
    out: list[Metric] = []
    legs: list[iperf3.Result | iperf3.Totals] = [res]
    if direction == "bidir" and res.bidir_reverse is not None:
        legs.append(res.bidir_reverse)
        down = ways["down"].goodput if "down" in ways else 0.0
        out += [Metric("goodput_up", ways["up"].goodput if "up" in ways else 0.0, "bit/s",
                       flow=flow),
                Metric("goodput_down", down, "bit/s", flow=flow),
                Metric("goodput_reverse", down, "bit/s", flow=flow)]
    out += [
        Metric("goodput", math.fsum(w.goodput for w in ways.values()), "bit/s", flow=flow),
        Metric("sent_rate", math.fsum(x.sent_bps for x in legs), "bit/s", flow=flow),
        Metric("bytes_received", float(sum(x.received_bytes for x in legs)), "bytes",
               flow=flow)]
    retrans = [x.retransmits for x in legs if x.retransmits is not None]
    if retrans:
        out.append(Metric("retransmits", float(sum(retrans)), "count", flow=flow))
    if res.protocol.upper() == "UDP":
        out += udp_metrics(legs, flow)
    return out


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    data, done = (None if x is None else x - t0 for x in (times.data_started,
                                                          times.output_done))
    collect_bulk(out, text, times.started - t0, window, data, done)


def iperf3_tool(udp: bool) -> FlowTool:
    """An iperf3 flow, TCP or UDP (-u)."""
    def client(flow: Flow, index: int, plan: Plan) -> list[str]:
        o = flow.options_as(IperfOptions)
        return iperf3.client_argv(iperf3.Client(
            host=address(plan, flow.dst, flow.family), port=IPERF3_BASE_PORT + index,
            duration_s=flow.duration_s, bytes=o.bytes, udp=udp, rate_bps=o.rate_bps,
            length=o.length, reverse=flow.direction == "down",
            bidir=flow.direction == "bidir", cport=o.cport, congestion=o.congestion,
            affinity=o.affinity, tos=o.tos, interval_s=REPORT_STEP_S,
            ipv6=flow.family == 6, get_server_output=True))
    return FlowTool(tool="iperf3", bulk=True, rtt=False,
                    media_type="application/json", server=_server, client=client,
                    collect=_collect,
                    congestion=lambda flow: flow.options_as(IperfOptions).congestion)


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    one_length(r, o, path)
    ports_fit(r, o, path)
    return bulk_flows(name, "tcp", src, dst, o), []


# RFC 6349's figures of a TCP test (hoplab.kinds.tcp_flows), the tcp_info sampler's.
RFC6349_METRICS = ("tcp_efficiency", "buffer_delay_ms", "buffer_delay_pct",
                   "transfer_time_ratio")
BOTTLENECK = Option(parse_rate, (
    "the path's bottleneck rate as a shaper counts it (Ethernet frames: a full TCP segment "
    "is a 1514-byte frame), for RFC 6349's `transfer_time_ratio` where the lab does not "
    "shape the path itself (a device's link)"), "the lab's slowest shaped link on the path")

KIND = register(Kind(
    name="tcp", options={**OPTIONS, "bottleneck": BOTTLENECK}, expand=_expand,
    figures=figures(),
    # Not sent_rate: what TCP was handed, not what arrived (metrics.py says why).
    headline=("goodput", "throughput_p5", "retransmits"),
    metrics=(*BULK_METRICS, *RFC6349_METRICS), flow=iperf3_tool(udp=False)))
