"""Every process a test starts on a node, written into its lab's state file.

`hoplab clean` after a SIGKILL of hoplab reads the record and stops exactly
those processes through each node's executor (a device: after reconnecting),
each only while its PID still has the recorded start time. A process is
written down as soon as it has started and crossed off once it is stopped, so
the record does not grow over the runs of an experiment.
"""

from __future__ import annotations

from collections.abc import Iterable

from hoplab.lab.state import LabState, Proc, find
from hoplab.nodes.executor import Process, ProcessId


class ProcessRecord:
    """The processes of one lab's tests; a lab that has no state file (a unit test's
    plan) records nothing."""

    def __init__(self, lab: str) -> None:
        self.state: LabState | None = find(lab)

    def started(self, proc: Process, role: str) -> None:
        if self.state is None:
            return
        ident = proc.ident
        self.state.processes.append(Proc(ident.pid, ident.start_ticks, list(proc.argv),
                                         ident.node, role))
        self.state.save()

    def stopped(self, idents: Iterable[ProcessId]) -> None:
        if self.state is None:
            return
        gone = {(i.node, i.pid, i.start_ticks) for i in idents}
        kept = [p for p in self.state.processes if (p.node, p.pid, p.start) not in gone]
        if len(kept) != len(self.state.processes):
            self.state.processes = kept
            self.state.save()


def recorded(state: LabState) -> list[ProcessId]:
    return [ProcessId(p.node, p.pid, p.start) for p in state.processes]
