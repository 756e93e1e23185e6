"""A test's bulk TCP flows: which node sends each one's data (where the tcp_info sampler
reads its socket) and RFC 6349's figures of them (hoplab.analysis.rfc6349) with what the
run knows: each direction's bottleneck, from the lab's slowest shaped link on the path or
the test's `bottleneck` option; the idle RTT of a probe before the load; the goodput."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from hoplab.analysis import rfc6349
from hoplab.kinds import flow_tool
from hoplab.lab.plan import Plan
from hoplab.record import Metric, Series
from hoplab.samplers.tcp_info import FlowSocket
from hoplab.spec.experiment import Flow, Test
from hoplab.spec.units import parse_rate


def _tcp(test: Test, plan: Plan) -> list[tuple[Flow, int, str]]:
    """(flow, server port, server node) of each bulk TCP flow: the flows of kind tcp (a
    tcp test's, rrul's and a custom test's), iperf3's, whose server's port the data
    connection goes to (a UDP flow's server port is its TCP control connection's)."""
    out = []
    for i, flow in enumerate(test.flows):
        server = flow_tool(flow.kind).server(flow, i, plan) if flow.kind == "tcp" else None
        if server is not None:
            out.append((flow, server.port, server.node))
    return out


def _ways(flow: Flow) -> tuple[str, ...]:
    return ("up", "down") if flow.direction == "bidir" else (flow.direction,)


def senders(test: Test, plan: Plan) -> dict[str, list[FlowSocket]]:
    """The nodes that send the test's bulk TCP data, each with how to find each of its
    flows' sockets (by the flow's server port): a flow's client sends it up, its
    server down, both a --bidir flow."""
    out: dict[str, list[FlowSocket]] = {}
    for flow, port, server in _tcp(test, plan):
        for way in _ways(flow):
            node = server if way == "down" else flow.src
            out.setdefault(node, []).append(FlowSocket(
                flow.name, port, local=way == "down",
                key=way if flow.direction == "bidir" else None))
    return out


def path_payload_rate(plan: Plan, src: str, dst: str, family: int) -> float | None:
    """The payload rate TCP can reach from src to dst through the lab's slowest shaped
    link on the path (its rate or its packets-per-second ceiling); None where the path
    has none, or crosses what the payload arithmetic does not know (a hop that is not
    one of the lab's links, a WireGuard hop's encapsulation, a trace)."""
    nodes = plan.path(src, dst, family)
    best: float | None = None
    for a, b in pairwise(nodes):
        link = next((lk for lk in plan.lab.links if {lk.a, lk.b} == {a, b}), None)
        if link is None or link.wireguard:
            return None
        way = link.forward if link.a == a else link.reverse
        if way.trace is not None:
            return None
        mtu = link.mtu or 1500
        rates = []
        if way.rate_bps is not None:
            rates.append(rfc6349.payload_rate(way.rate_bps, family, mtu))
        if way.pps is not None:
            rates.append(way.pps * 8.0 * (mtu - rfc6349.IP_HEADER[family]
                                           - rfc6349.TCP_HEADER))
        for r in rates:
            best = r if best is None else min(best, r)
    return best


def ideal_rates(test: Test, plan: Plan) -> dict[str | None, float]:
    """The bottleneck's payload rate per direction key (None when the test's data goes
    one way): the test's `bottleneck` (a rate as a shaper counts it: Ethernet frames), or
    the lab's, where every flow of the direction meets the same one."""
    flows = _tcp(test, plan)
    ways = sorted({w for flow, _, _ in flows for w in _ways(flow)})
    given = test.options.get("bottleneck")
    out: dict[str | None, float] = {}
    for way in ways:
        found: set[float | None] = set()
        for flow, _, server in flows:
            if way not in _ways(flow):
                continue
            src, dst = (flow.src, server) if way == "up" else (server, flow.src)
            if given is None:
                found.add(path_payload_rate(plan, src, dst, flow.family))
            else:
                found.add(rfc6349.payload_rate(parse_rate(given), flow.family))
        if len(found) == 1:
            (rate,) = found
            if rate is not None:
                out[way if len(ways) > 1 else None] = rate
    return out


def rfc6349_metrics(test: Test, plan: Plan, series: Sequence[Series],
                    metrics: Sequence[Metric], window: tuple[float, float]) -> list[Metric]:
    """RFC 6349's figures of the test's bulk TCP flows; [] for a test without any."""
    if not _tcp(test, plan):
        return []
    run = {(m.name, m.key): m.value for m in metrics if m.flow is None and m.node is None}
    ideal = ideal_rates(test, plan)
    goodput = {k: run[(f"goodput_{k}" if k else "goodput", None)] for k in ideal
               if (f"goodput_{k}" if k else "goodput", None) in run}
    return rfc6349.figures(series, window, idle_rtt_ms=run.get(("latency_idle", None)),
                           goodput=goodput, ideal=ideal)
