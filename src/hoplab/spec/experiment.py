"""The validated experiment: a lab, tests made of flows, a matrix of variants, repetitions.

Every test kind (hoplab.kinds: tcp, udp, ping, probe, rrul, custom, web, and any
kind registered in hoplab.kind_registry) is expanded by the loader into the same
thing: a list of flows, each between two nodes with a start offset and a duration,
plus named phases. The orchestrator only knows flows. Units are normalised as in the
lab model: bit/s, seconds, bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

from hoplab import kind_registry as registry
from hoplab import kv
from hoplab.spec.model import Lab

T = TypeVar("T")

DIRECTIONS = ("up", "down", "bidir")
SAMPLER_KINDS = ("cpu", "ifaces", "qdisc", "tcp", "tcp_info", "wire")


@dataclass(frozen=True)
class Flow:
    """One traffic source between two nodes. `src` runs the client; `direction` says who
    sends: up is src -> dst, down is dst -> src, bidir both (a bulk flow's choice: tcp
    and udp, iperf3 -R and --bidir; every other flow is up)."""

    name: str
    kind: str
    src: str
    dst: str
    start_s: float = 0.0
    duration_s: float | None = None
    direction: str = "up"
    family: int = 4
    # The kind's own options of this flow, of a type its module declares (tcp's client
    # port and rate, ping's interval and size, web's objects...): read back typed with
    # options_as(). The loader and the orchestrator know none of them.
    options: object = None

    def options_as(self, cls: type[T]) -> T:
        """This flow's own options, as the type its kind declared for them."""
        if not isinstance(self.options, cls):
            raise TypeError(f"flow {self.name}: its options are "
                            f"{type(self.options).__name__}, not {cls.__name__}")
        return self.options

    def as_record(self) -> dict[str, Any]:
        """The flow as a run's metadata keeps it (docs/data-format.md): its own fields and
        its kind's options beside them, under the names its kind gave them."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "options"}
        if is_dataclass(self.options) and not isinstance(self.options, type):
            out.update(asdict(self.options))
        return out

    @property
    def bulk(self) -> bool:
        """Whether the flow moves data (its kind's tool says): totals and fairness count it."""
        return registry.flow_tool(self.kind).bulk

    @property
    def end_s(self) -> float | None:
        return None if self.duration_s is None else self.start_s + self.duration_s

    @property
    def sender(self) -> str:
        """The node whose data this flow carries (for per-host fairness)."""
        return self.dst if self.direction == "down" else self.src


@dataclass(frozen=True)
class Phase:
    name: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Samplers:
    """What to sample while a test runs. nodes None: the routers on the test's path."""

    nodes: tuple[str, ...] | None = None
    kinds: tuple[str, ...] = SAMPLER_KINDS
    interval_s: float = 0.1


@dataclass(frozen=True)
class Profile:
    """perf sampling during one phase. nodes: whose processes are attributed by name (kernel
    work, softirq included, is host-wide: a lab's nodes share one kernel)."""

    nodes: tuple[str, ...] | None = None
    frequency: int = 999
    during: str = "load"
    categories: str | None = None  # a category table (TOML); None: hoplab's default


@dataclass(frozen=True)
class Test:
    # Not a pytest test class, whatever its name.
    __test__ = False

    name: str
    kind: str
    src: str
    dst: str
    flows: tuple[Flow, ...]
    phases: tuple[Phase, ...]
    samplers: Samplers = field(default_factory=Samplers)
    profile: Profile | None = None
    # The options as resolved for this variant (after matrix overrides), for the record.
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return max((p.end_s for p in self.phases), default=0.0)

    def phase(self, name: str) -> Phase | None:
        if name == "all":
            return Phase("all", 0.0, self.duration_s)
        if name == "load":
            return self.load
        return next((p for p in self.phases if p.name == name), None)

    @property
    def load(self) -> Phase:
        """The phase figures are summarised over: "load" if there is one, else all."""
        for p in self.phases:
            if p.name == "load":
                return p
        return Phase("all", 0.0, self.duration_s)


@dataclass(frozen=True)
class Variant:
    """One point of the matrix: its values, and the lab and tests they produce."""

    values: dict[str, Any]
    lab: Lab
    tests: tuple[Test, ...]
    # Commands run in a node (cwd: the experiment's directory) after the lab is up.
    setup: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def label(self) -> str:
        return kv.pairs(self.values, "(default)")


@dataclass(frozen=True)
class Experiment:
    name: str
    source: str
    lab_source: str
    repeat: int
    seed: int
    shuffle: bool
    labels: dict[str, str]
    pause_s: float
    variants: tuple[Variant, ...]
    matrix: dict[str, tuple[Any, ...]]
    # `hoplab run` compares the two variants when done (cli/run_report.py).
    report: bool = False

    def runs(self) -> int:
        return self.repeat * sum(len(v.tests) for v in self.variants)

    def traffic_s(self) -> float:
        """The least an experiment takes: every run's test duration and the pause after
        it (building labs and starting tools come on top; a search such as RFC 2544's
        throughput counts only what its test declares)."""
        return self.repeat * sum(t.duration_s + self.pause_s
                                 for v in self.variants for t in v.tests)
