"""The one registry of test kinds: what each kind accepts, the flows it expands to, the
tools those flows run, how its figures are computed and which of them head a summary.

The loader (spec), the lab's tool checks, the orchestrator (run) and the renderers ask
here instead of testing a kind's name. A new kind is one module that builds a Kind and
calls register() (docs/kinds.md).

This module sits below every layer that asks it and imports nothing of hoplab at run
time but the tool table (a leaf of the core), so it cannot load the kinds itself.
Importing the package hoplab.kinds (light: it loads none of them) gives it the loader
of the built-in ones (kinds/builtin.py), run at the first question, as the front ends
do (the command line, the dashboard, the orchestrator). A question asked when nothing
has done that is a fault, said as one, never answered from an empty registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hoplab.tool_table import debian

if TYPE_CHECKING:
    from pathlib import Path as FilePath

    from hoplab.kinds.flow import ClientTimes, Outcome, Server
    from hoplab.kinds.procedure import Context, Result
    from hoplab.lab.plan import Plan
    from hoplab.record import Metric, Series
    from hoplab.spec.experiment import Flow, Phase, Test
    from hoplab.spec.loader import SpecContext
    from hoplab.spec.locate import Path

# An option's parser: the raw TOML value in, the normalised one out; ValueError with a
# message for the user (the loader adds file, line and key).
Parse = Callable[[object], Any]

# A test's flows run together, each a tool's process and most with a server of their
# own (iperf3's on port 5201 + the flow's index): rrul has 258 at most, a custom test
# composes more.
MAX_TEST_FLOWS = 1024

# How long a flow runs when its test gives neither a duration nor a byte count.
DEFAULT_DURATION_S = 10.0
# How long hoplab lets a flow of unknown length (a byte count, loads back to back) run
# before it stops it as hung.
BYTES_LIMIT_S = 600.0


@dataclass(frozen=True)
class Option:
    """One key a kind accepts: its parser, and what the kind's table in
    docs/experiment-format.md says of it (its default as a reader writes it, and what it
    means); the table is made from these (hoplab.kinds.doc)."""

    parse: Parse
    doc: str
    default: str = "–"

    def __call__(self, value: object) -> Any:
        return self.parse(value)


class Reader(Protocol):
    """What a kind's expansion may ask of the loader; its errors name file, line and key."""

    @property
    def ctx(self) -> SpecContext: ...

    def node(self, path: Path, value: object) -> str: ...

    def options(self, raw: object, path: Path, allowed: Mapping[str, Parse]
                ) -> dict[str, Any]: ...

    def flow_options(self, kind: str) -> Mapping[str, Parse]:
        """The keys a flow of `kind` accepts inside a custom test."""
        ...


# (reader, test name, from, to, the test's options, where) -> the flows and the phases
# (none: one "load" phase over the flows).
Expand = Callable[["Reader", str, "str | None", "str | None", dict[str, Any], "Path"],
                  "tuple[list[Flow], list[Phase]]"]
# (test, the flows' outcomes, end of the run) -> whole-run series, metrics, notes.
Figures = Callable[["Test", "Sequence[Outcome]", float],
                   "tuple[list[Series], list[Metric], dict[str, str]]"]


@dataclass(frozen=True)
class FlowTool:
    """How one flow of a kind runs and what its output becomes."""

    tool: str                   # the executable the client runs
    bulk: bool                  # moves data: totals, goodput, fairness count it
    rtt: bool                   # gives round-trip samples: latency figures pool them
    media_type: str             # of its raw output
    # (flow, its index in the test, plan) -> the server to start first, or None.
    server: Callable[[Flow, int, Plan], Server | None]
    # (flow, index, plan) -> the client's argv.
    client: Callable[[Flow, int, Plan], list[str]]
    # (outcome, output text, run clock zero, when the client started, its flow's data
    # began to move and it wrote its output, load window): fills the outcome's series,
    # metrics and parsed results.
    collect: Callable[[Outcome, str, float, ClientTimes, tuple[float, float]], None]
    # Other executables its flows run (its server, when that is another tool), each with
    # the Debian package that has it: checked with `tool` before anything runs.
    needs: tuple[tuple[str, str], ...] = ()
    # The executable its server runs when that is not `tool` (web: nginx): what a device
    # at the flow's destination must have.
    server_tool: str | None = None
    # How long past its duration a flow's client may run by a timeout of its own (a web
    # flow's last load may start just before its end and take its whole timeout).
    overrun: Callable[[Flow], float] = lambda _flow: 0.0
    # The TCP congestion control a flow asks of the kernels at both its ends (iperf3 -C
    # sets it on both sockets), or None: the loader checks it against this machine's
    # kernel for a namespace end, `hoplab check --devices` against a device's.
    congestion: Callable[[Flow], str | None] = lambda _flow: None
    # The Debian package that has `tool`: hoplab.tool_table's entry, unless given.
    package: str = ""
    # A client slow to start (a browser): (flow, index, plan, go) -> its argv when it is
    # started before the test's clock. It is ready once it has written a whole line, and
    # begins its flow when the file `go` holds the clock's Unix time (written at the
    # flow's offset): its start-up is then not taken from the other flows' time.
    warm: Callable[[Flow, int, Plan, FilePath], list[str]] | None = None

    def __post_init__(self) -> None:
        if not self.package:
            object.__setattr__(self, "package", debian(self.tool))


@dataclass(frozen=True)
class Kind:
    name: str
    # Options of this kind beyond every test's own (name, kind, from, to, start,
    # samplers, profile): each key's parser and documentation.
    options: Mapping[str, Option]
    expand: Expand
    figures: Figures
    # The figures that summarise a run of this kind, in the order a reader wants them.
    headline: tuple[str, ...]
    # Every metric name a run of this kind may carry (each is in hoplab.metrics), but
    # those of its flows' kinds when it composes them (metrics_of).
    metrics: tuple[str, ...]
    # Set when a flow of this kind can run on its own (and in a custom test).
    flow: FlowTool | None = None
    # True when its flows may be of any flow kind (custom): its runs carry their figures.
    composes: bool = False
    # False when from and to may come from the flows instead (custom).
    needs_ends: bool = True
    # Non-empty: the summary has a row per flow with these figures (custom).
    flow_headline: tuple[str, ...] = ()
    # Run notes (metadata) a summary shows as columns, e.g. rrul's bufferbloat grade.
    notes: tuple[str, ...] = ()
    # Set when its headline figures are per key (throughput: per frame size, the key's
    # name here): the summary has a row per key.
    keyed: str | None = None
    # Set when the kind runs a procedure of its own instead of its flows on a schedule
    # (throughput's search over trials): the orchestrator calls it between clock zero
    # and the samplers' stop (hoplab.kinds.procedure).
    procedure: Callable[[Context], Result] | None = None
    # Set when a change in how this kind alone measures makes its old and new runs not
    # comparable: its runs carry this measurement version instead of hoplab's
    # (hoplab.record.MEASUREMENT_VERSION), so compare never pairs them.
    measurement_version: int | None = None


_KINDS: dict[str, Kind] = {}
# The built-in kinds in their own order (errors and docs list them so), once
# hoplab.kinds has registered them, and what registers them (hoplab.kinds gives it).
_BUILTIN: tuple[str, ...] | None = None
_LOADER: Callable[[], None] | None = None


def register(kind: Kind) -> Kind:
    """Add `kind`; registering a name twice with another definition is an error."""
    known = _KINDS.get(kind.name)
    if known is not None and known != kind:
        raise ValueError(f"test kind {kind.name} registered twice, differently")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind (tests that register one of their own)."""
    _KINDS.pop(name, None)


def load_builtin_with(loader: Callable[[], None]) -> None:
    """What registers the built-in kinds, run at the first question (hoplab.kinds)."""
    global _LOADER
    _LOADER = loader


def builtin_registered(order: Sequence[str]) -> None:
    """Called by hoplab.kinds once its built-in kinds are registered, in their order."""
    global _BUILTIN
    missing = [n for n in order if n not in _KINDS]
    if missing:
        raise ValueError(f"built-in test kinds not registered: {', '.join(missing)}")
    _BUILTIN = tuple(order)


def _loaded() -> dict[str, Kind]:
    """Every kind, the built-ins first in their own order, then the others as they were
    registered."""
    if _BUILTIN is None and _LOADER is not None:
        _LOADER()
    if _BUILTIN is None:
        raise RuntimeError("the test kinds are not loaded: import hoplab.kinds before "
                           "reading, running or showing tests")
    rank = {name: i for i, name in enumerate(_BUILTIN)}
    return {n: _KINDS[n] for n in sorted(_KINDS, key=lambda n: rank.get(n, len(rank)))}


def find(name: str) -> Kind | None:
    return _loaded().get(name)


def get(name: str) -> Kind:
    """The kind `name`; KeyError naming the known ones if there is none."""
    kind = _loaded().get(name)
    if kind is None:
        raise KeyError(f"no test kind {name!r}; known: {', '.join(names())}")
    return kind


def names() -> tuple[str, ...]:
    """Every kind, in registration order (the built-ins first)."""
    return tuple(_loaded())


def flow_names() -> tuple[str, ...]:
    """The kinds a flow of a custom test may be."""
    return tuple(k.name for k in _loaded().values() if k.flow is not None)


def flow_tool(name: str) -> FlowTool:
    """How a flow of kind `name` runs; KeyError if flows cannot be of that kind."""
    tool = get(name).flow
    if tool is None:
        raise KeyError(f"test kind {name!r} is not a kind of flow")
    return tool


def metrics_of(name: str) -> tuple[str, ...]:
    """Every metric a run of kind `name` may carry: its own, and when it composes flows of
    any kind, every flow kind's."""
    kind = get(name)
    more = [m for k in _loaded().values() if kind.composes and k.flow is not None
            for m in k.metrics]
    return tuple(dict.fromkeys((*kind.metrics, *more)))


def per_flow(name: str) -> bool:
    """Whether runs of kind `name` are summarised and compared flow by flow (custom)."""
    kind = find(name)
    return kind is not None and bool(kind.flow_headline)


class _Headlines(Mapping[str, tuple[str, ...]]):
    """kind -> its headline figures, read from the registry at each lookup (so a kind
    registered later is there too)."""

    def __getitem__(self, name: str) -> tuple[str, ...]:
        kind = find(name)
        if kind is None:
            raise KeyError(name)
        return kind.headline

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(names())


HEADLINES: Mapping[str, tuple[str, ...]] = _Headlines()
