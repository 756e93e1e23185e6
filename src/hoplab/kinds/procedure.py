"""The contract of a kind that runs a procedure of its own instead of flows on a schedule:
RFC 2544 throughput searches, trial after trial, for a rate it cannot know beforehand.

The orchestrator (hoplab.run.execute) starts the samplers and the clock as for any test,
then hands the procedure a Context: the test, the planned lab, the nodes' executors and
a launcher that starts processes the way every test's processes start (logged for
`hoplab clean`, stopped on any exit). The procedure returns what it measured; the
orchestrator stops everything and stores it. Interrupted, it leaves what it had measured
in the Context's `result`, which the interrupted run is stored with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hoplab.lab.plan import Plan
from hoplab.nodes.executor import Executor
from hoplab.record import Metric, RawOutput, Series
from hoplab.spec.experiment import Test


class Running(Protocol):
    """A process a procedure started."""

    @property
    def started(self) -> float: ...

    def poll(self) -> int | None: ...

    def output(self) -> bytes: ...

    def stop(self, grace: float = 2.0) -> None:
        """Ends it if it still runs, and reaps it (no zombie while the procedure goes on)."""


class Launcher(Protocol):
    """Starts a tracked process on a node (hoplab.run.procs.ProcessGroup is one)."""

    def start(self, name: str, node: str, argv: Sequence[str], flow: str | None = None
              ) -> Running: ...

    def will_undo(self, node: str, argv: Sequence[str]) -> None:
        """Logs a command that takes away what the procedure put on a node, which `lab
        down` and `hoplab clean` run if the run is killed before `undone`."""

    def undone(self, node: str, argv: Sequence[str]) -> None: ...


@dataclass
class Result:
    series: list[Series] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    raw: list[RawOutput] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)


@dataclass
class Context:
    test: Test
    plan: Plan
    nodes: Mapping[str, Executor]
    launcher: Launcher
    t0: float                       # clock zero (Unix time)
    tick: Callable[[float], None]   # progress: seconds since clock zero
    # Returns once every port listens on the node (node, "tcp"|"udp", ports, the server
    # processes, whose early exit fails it), as every test's servers are waited for.
    listening: Callable[[str, str, Iterable[int], Sequence[Running]], None]
    # Where the procedure puts what it measured as it goes (it returns it): when it is
    # interrupted, the orchestrator stores what this holds with the interrupted run.
    result: Result = field(default_factory=Result)
