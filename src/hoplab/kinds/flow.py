"""What a kind's flow is given and gives back: the server it asks for, when its client
ran, the address its tool is pointed at, and its outcome (series, metrics and the
parsed results its kind's figures read)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from hoplab.lab.plan import Plan
from hoplab.record import Metric, RawOutput, Series
from hoplab.spec.experiment import Flow
from hoplab.tools.iperf3 import Result

# iperf3 reports at this step; the issue asks for 0.2 s or finer. Summed throughput is
# binned on it.
REPORT_STEP_S = 0.2

# The content a server wants, by path under its home; a path ending in "/" is a
# directory.
Files = Mapping[str, bytes]


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


@dataclass(frozen=True)
class ClientTimes:
    """When a client ran, in Unix time: just before its exec, when its flow's data began
    to move (None when that was not watched or not seen) and its output's last write
    (None when it wrote nothing)."""
    started: float
    data_started: float | None
    output_done: float | None


@dataclass
class Outcome:
    flow: Flow
    raw: list[RawOutput] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    error: str | None = None
    # Parsed results, kept for test-level figures (totals, phases, fairness).
    bulk: Result | None = None
    # When the flow's receiver's clock started and how long it counted, on the run clock:
    # where its intervals begin.
    span: tuple[float, float] | None = None
    # Each direction it moved data in ("up", "down"): when its receiver's data arrived,
    # on the run clock, and how many bytes (start, end, bytes); goodput is their rate.
    received: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    rtt_t: list[float] = field(default_factory=list)   # run clock, s
    rtt_ms: list[float] = field(default_factory=list)  # None-free: answered probes only
    # A probe flow's packets: (sent, received), which the test's pooled loss adds up.
    packets: tuple[int, int] | None = None

    def metric_value(self, name: str) -> float:
        """This flow's figure `name`, 0.0 when it has none (a failed flow adds nothing)."""
        for m in self.metrics:
            if m.name == name and m.flow == self.flow.name and m.node is None:
                return m.value
        return 0.0


def address(plan: Plan, node: str, family: int) -> str:
    """The address a flow's tool is pointed at (an address from the plan, not a name, so
    no lookup sits in the path)."""
    n = plan.node(node)
    addr = n.primary6 if family == 6 else n.primary4
    if addr is None:
        raise ValueError(f"node {node} has no IPv{family} address")
    return str(addr)
