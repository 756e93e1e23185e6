"""One flow of a test: its server, its client command, and what its output becomes.

The flow's kind (hoplab.kinds) builds its server and client commands: iperf3
serves one test at a time, so every bulk flow gets its own one-off server on its
own port; every probe flow its own irtt server. Clients are pointed at addresses
from the plan, not names, so no lookup sits in the path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from hoplab.kinds import registry
from hoplab.lab.plan import Plan
from hoplab.record import Metric, RawOutput, Series
from hoplab.run.server_home import Files
from hoplab.spec.experiment import Flow
from hoplab.tools import iperf3

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
    # A server with files of its own (nginx: its config and pages) gets a directory on
    # its node (run/server_home.py), made before it starts and removed once it has
    # stopped: files(that directory) -> (its files by path under it, the server's argv,
    # which replaces argv).
    files: Callable[[PurePosixPath], tuple[Files, list[str]]] | None = None


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
    return registry.flow_tool(flow.kind).server(flow, index, plan)


def client_argv(flow: Flow, index: int, plan: Plan) -> list[str]:
    return registry.flow_tool(flow.kind).client(flow, index, plan)
