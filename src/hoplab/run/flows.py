"""One flow of a test: its server, its client command, and what its output becomes.

iperf3 serves one test at a time, so every bulk flow gets its own one-off
server on its own port; every probe flow its own irtt server. Clients are
pointed at addresses from the plan, not names, so no lookup sits in the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hoplab.lab.plan import Plan
from hoplab.record import Metric, RawOutput, Series
from hoplab.spec.experiment import Flow
from hoplab.tools import iperf3, irtt, ping

IPERF3_BASE_PORT = 5201
IRTT_BASE_PORT = 2112
# iperf3 reports at this step; the issue asks for 0.2 s or finer.
REPORT_STEP_S = 0.2


@dataclass(frozen=True)
class Server:
    node: str
    proto: str  # "tcp" | "udp"
    port: int
    argv: list[str]


@dataclass
class Outcome:
    flow: Flow
    raw: list[RawOutput] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    error: str | None = None
    # Parsed results, kept for test-level figures (totals, phases, fairness).
    bulk: iperf3.Result | None = None
    # When the flow's client started and how long its receiver counted, on the run clock.
    span: tuple[float, float] | None = None
    rtt_t: list[float] = field(default_factory=list)   # run clock, s
    rtt_ms: list[float] = field(default_factory=list)  # None-free: answered probes only

    def metric_value(self, name: str) -> float:
        """This flow's figure `name`, 0.0 when it has none (a failed flow adds nothing)."""
        for m in self.metrics:
            if m.name == name and m.flow == self.flow.name and m.node is None:
                return m.value
        return 0.0


def address(plan: Plan, node: str, family: int) -> str:
    n = plan.node(node)
    addr = n.primary6 if family == 6 else n.primary4
    if addr is None:
        raise ValueError(f"node {node} has no IPv{family} address")
    return str(addr)


def server_for(flow: Flow, index: int, plan: Plan) -> Server | None:
    if flow.bulk:
        port = IPERF3_BASE_PORT + index
        return Server(flow.dst, "tcp", port, iperf3.server_argv(port))
    if flow.kind == "probe":
        port = IRTT_BASE_PORT + index
        bind = address(plan, flow.dst, flow.family)
        return Server(flow.dst, "udp", port, irtt.server_argv(bind, port))
    return None


def client_argv(flow: Flow, index: int, plan: Plan) -> list[str]:
    host = address(plan, flow.dst, flow.family)
    if flow.bulk:
        return iperf3.client_argv(iperf3.Client(
            host=host, port=IPERF3_BASE_PORT + index, duration_s=flow.duration_s,
            bytes=flow.bytes, udp=flow.kind == "udp", rate_bps=flow.rate_bps,
            length=flow.length, reverse=flow.direction == "down",
            bidir=flow.direction == "bidir", cport=flow.cport, congestion=flow.congestion,
            affinity=flow.affinity, tos=flow.tos, interval_s=REPORT_STEP_S,
            ipv6=flow.family == 6, get_server_output=True))
    if flow.kind == "probe":
        return irtt.client_argv(irtt.Client(
            host=host, port=IRTT_BASE_PORT + index, duration_s=flow.duration_s or 10.0,
            interval_s=flow.interval_s or 0.02, length=flow.length or 172,
            dscp=flow.tos, ipv6=flow.family == 6))
    return ping.argv(ping.Stream(
        host=host, interval_s=flow.interval_s or 0.2, duration_s=flow.duration_s,
        size=flow.size or 56, tos=flow.tos, ipv6=flow.family == 6))
