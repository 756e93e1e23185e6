"""The one registry of test kinds: what each kind accepts, the flows it expands to, the
tools those flows run, how its figures are computed and which of them head a summary.

The loader (spec), the orchestrator (run) and the renderers ask here instead of
testing a kind's name. A new kind is one module that builds a Kind and calls
register() (docs/kinds.md); the built-in kinds are hoplab/kinds/{tcp,udp,ping,
probe,rrul,custom}.py, loaded the first time the registry is asked.

This module imports nothing of hoplab at run time, so that the layers that
consult it (spec, run, render) can import it without a cycle; the kind modules
import those layers themselves.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from hoplab.lab.plan import Plan
    from hoplab.record import Metric, Series
    from hoplab.run.flows import Outcome, Server
    from hoplab.run.procs import ClientTimes
    from hoplab.spec.experiment import Flow, Phase, Test
    from hoplab.spec.loader import SpecContext
    from hoplab.spec.locate import Path

# An option's parser: the raw TOML value in, the normalised one out; ValueError with a
# message for the user (the loader adds file, line and key).
Parse = Callable[[object], Any]

# How long a flow runs when its test gives neither a duration nor a byte count.
DEFAULT_DURATION_S = 10.0


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
    package: str                # the Debian package that has it
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


@dataclass(frozen=True)
class Kind:
    name: str
    # Options of this kind beyond every test's own (name, kind, from, to, start,
    # samplers, profile): each key's parser.
    options: Mapping[str, Parse]
    expand: Expand
    figures: Figures
    # The figures that summarise a run of this kind, in the order a reader wants them.
    headline: tuple[str, ...]
    # Every metric name a run of this kind may carry (each is in hoplab.metrics).
    metrics: tuple[str, ...]
    # Set when a flow of this kind can run on its own (and in a custom test).
    flow: FlowTool | None = None
    # False when from and to may come from the flows instead (custom).
    needs_ends: bool = True
    # Non-empty: the summary has a row per flow with these figures (custom).
    flow_headline: tuple[str, ...] = ()
    # Run notes (metadata) a summary shows as columns, e.g. rrul's bufferbloat grade.
    notes: tuple[str, ...] = ()


_KINDS: dict[str, Kind] = {}
_BUILTIN = "hoplab.kinds.builtin"


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


def _loaded() -> dict[str, Kind]:
    """Every kind, the built-ins first in their own order (whichever module was imported
    first), then the others as they were registered. The built-in kinds import spec,
    run and tools; loading them on first use (not at import) lets those layers import
    this module."""
    order: tuple[str, ...] = importlib.import_module(_BUILTIN).BUILTIN
    rank = {name: i for i, name in enumerate(order)}
    return {n: _KINDS[n] for n in sorted(_KINDS, key=lambda n: rank.get(n, len(order)))}


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
