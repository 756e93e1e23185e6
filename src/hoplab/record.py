"""What one run keeps: the model shared by orchestration, samplers, store and analysis.

A run is one execution of one test on one variant, in one repetition. It is
written to the store as soon as it ends (finished, failed or interrupted), so
an experiment stopped part way keeps every run before the stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# Bumped whenever a change in how hoplab measures would make old and new
# figures not comparable (tool options, metric definitions, clock alignment).
# 2: ping streams are a count of probes, not a deadline (loss no longer counts probes in
# flight); --bidir goodput counts both directions; summed rates are binned by each
# interval's span; rrul's load window and the load-phase CPU mean leave out the idle
# interval before the load; udp_jitter and rtt_jitter replace jitter; a bulk flow's
# intervals start when its data began to move, not when its client started.
# 3: loss is packets sent less received over sent, by the sender's count, everywhere (a
# UDP flow's was iperf3's gaps over the sender's count, its run's the gaps over the
# receiver's highest sequence number); a UDP flow's goodput counts from its first
# datagram, not its receiver's test start (an upload's was a round trip low).
MEASUREMENT_VERSION = 3
# A kind may carry a version of its own (Kind.measurement_version) when only its way of
# measuring changed; the next version of all kinds is above every kind's own.
# throughput 4: RFC 2544 by the book (issue 30): no trial chosen among repeats (a trial
# the generator fell short in is invalid, repeated and counted), each trial's achieved
# rate stored beside the rate asked, the NDR an achieved rate, and hoplab-gen's frames
# from an AF_PACKET socket instead of UDP sockets.
# Runs imported from files another tool wrote were measured that tool's way (Flent's
# goodput is the mean of its rate points, not bytes over time; an iperf3 -J output was
# taken with its user's options, clock and report interval). Each source has its own
# measurement version, apart from hoplab's, so compare never pairs them with hoplab's
# runs as like with like; runs of one source still compare with each other.
# iperf3 1003: UDP loss and goodput as measurement version 3 has them (1002 before).
IMPORTED_MEASUREMENT_VERSIONS = {"flent": 1001, "iperf3": 1003}

Status = Literal["ok", "failed", "interrupted", "cancelled", "superseded"]


@dataclass
class Series:
    """One time series on the run's clock: t is seconds since the run started.

    name: what is measured, e.g. "throughput", "rtt", "cpu.softirq", "iface.tx_bytes".
    node: the node it was read on (or None); flow: the flow it belongs to (or None);
    key: anything else that tells series of one name apart (a core, an interface,
    a qdisc handle, a direction), or None.
    """

    name: str
    unit: str
    t: list[float]
    v: list[float]
    node: str | None = None
    flow: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if len(self.t) != len(self.v):
            raise ValueError(f"series {self.name}: {len(self.t)} times but {len(self.v)} values")


@dataclass
class Metric:
    """One summary figure. `flow` is None for whole-run figures."""

    name: str
    value: float
    unit: str
    flow: str | None = None
    node: str | None = None
    key: str | None = None


@dataclass
class RawOutput:
    """A tool's output exactly as it printed it; the store keeps it compressed."""

    name: str
    data: bytes
    # e.g. "application/json" for iperf3 -J and irtt -o, "text/plain" for ping.
    media_type: str = "text/plain"


@dataclass
class RunRecord:
    experiment: str                 # the experiment's name (file stem unless given)
    test: str                       # the test's name in the experiment
    kind: str                       # tcp, udp, ping, probe, rrul, custom
    repetition: int                 # 1-based
    variant: dict[str, Any]         # matrix values of this run, e.g. {"hops": 2}
    labels: dict[str, str]          # user labels (device, firmware, commit, ...)
    started_at: float               # Unix time (s) at the run's clock zero
    duration_s: float = 0.0
    status: Status = "ok"
    error: str | None = None
    seed: int | None = None         # the experiment's shuffle seed
    order: int | None = None        # position of this run in the shuffled order (0-based)
    experiment_id: str | None = None  # groups the runs of one `hoplab run` invocation
    measurement_version: int = MEASUREMENT_VERSION
    metadata: dict[str, Any] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    raw: list[RawOutput] = field(default_factory=list)
    id: int | None = None           # set by the store

    def metric(self, name: str, flow: str | None = None, node: str | None = None,
               key: str | None = None) -> float | None:
        for m in self.metrics:
            if (m.name, m.flow, m.node, m.key) == (name, flow, node, key):
                return m.value
        return None


class DuplicateMetric(ValueError):
    """Two metrics of one run with the same name, flow, node and key: every view would
    pick a different one, so such a run is refused when it is saved."""


def check_metric_keys(run: RunRecord) -> None:
    """Raise DuplicateMetric naming every (name, flow, node, key) the run holds twice."""
    seen: set[tuple[str, str | None, str | None, str | None]] = set()
    twice: list[str] = []
    for m in run.metrics:
        k = (m.name, m.flow, m.node, m.key)
        if k in seen:
            where = ", ".join(f"{f}={v}" for f, v in zip(("flow", "node", "key"), k[1:],
                                                         strict=True) if v is not None)
            twice.append(f"{m.name}" + (f" ({where})" if where else ""))
        seen.add(k)
    if twice:
        raise DuplicateMetric(f"two metrics with the same name, flow, node and key: "
                              f"{', '.join(dict.fromkeys(twice))}")


# Flow kinds whose `jitter` was iperf3's (RFC 3550, UDP) before the figure was split into
# udp_jitter and rtt_jitter; every other flow's was the mean RTT difference (ping, irtt).
_UDP_JITTER_RUN_KINDS = ("udp",)


def upgrade_imported_version(run: RunRecord) -> RunRecord:
    """Give a run imported by an older hoplab, which marked imports with hoplab's own
    measurement version, its source's (IMPORTED_MEASUREMENT_VERSIONS)."""
    source = (run.metadata.get("imported_from") or {}).get("format")
    version = IMPORTED_MEASUREMENT_VERSIONS.get(source) if isinstance(source, str) else None
    if version is not None and run.measurement_version < min(
            IMPORTED_MEASUREMENT_VERSIONS.values()):
        run.measurement_version = version
    return run


def upgrade_names(run: RunRecord) -> RunRecord:
    """Give a run saved by an older hoplab today's metric names (docs/data-format.md),
    and an old import its source's measurement version (upgrade_imported_version).

    `jitter` meant two things: iperf3's UDP jitter and the mean difference of
    consecutive RTTs; a custom test with a UDP flow and one ping stream held both as
    whole-run figures. Per flow, the flow's kind decides; for the whole run, the test's
    kind, and in a custom test the first of two was the UDP one (totals came first)."""
    upgrade_imported_version(run)
    if not any(m.name == "jitter" for m in run.metrics):
        return run
    flows = (run.metadata.get("test") or {}).get("flows") or []
    kinds = {f.get("name"): f.get("kind") for f in flows if isinstance(f, dict)}
    has_udp = "udp" in kinds.values() or run.kind in _UDP_JITTER_RUN_KINDS
    whole = [m for m in run.metrics if m.name == "jitter" and m.flow is None
             and m.node is None and m.key is None]
    for m in run.metrics:
        if m.name != "jitter":
            continue
        if m.flow is not None and m.flow in kinds:
            udp = kinds[m.flow] == "udp"
        elif len(whole) > 1 and any(m is w for w in whole):
            udp = m is whole[0]
        else:
            udp = has_udp if run.kind == "custom" else run.kind in _UDP_JITTER_RUN_KINDS
        m.name = "udp_jitter" if udp else "rtt_jitter"
    return run
