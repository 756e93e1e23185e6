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
    plan) records nothing. The record is read again before each change: a test's tools
    and its perf are written by two of these, and neither may drop the other's."""

    def __init__(self, lab: str) -> None:
        self.lab = lab
        self.active = find(lab) is not None

    def started(self, proc: Process, role: str) -> None:
        state = find(self.lab) if self.active else None
        if state is None:
            return
        ident = proc.ident
        state.processes.append(Proc(ident.pid, ident.start_ticks, list(proc.argv),
                                    ident.node, role))
        state.save()

    def stopped(self, idents: Iterable[ProcessId]) -> None:
        gone = {(i.node, i.pid, i.start_ticks) for i in idents}
        state = find(self.lab) if self.active and gone else None
        if state is None:
            return
        kept = [p for p in state.processes if (p.node, p.pid, p.start) not in gone]
        if len(kept) != len(state.processes):
            state.processes = kept
            state.save()


def recorded(state: LabState) -> list[ProcessId]:
    return [ProcessId(p.node, p.pid, p.start) for p in state.processes]
