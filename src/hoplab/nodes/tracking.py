"""Every process a test starts on a node, written down where `hoplab clean` finds it.

A line per process started and per process stopped is appended to
processes.jsonl in the lab's run directory (/run/hoplab/labs/LAB/), next to
the lab's state file: one small append, 0.05 ms, where rewriting the state
file cost 5 ms for a 10-node lab and 150 ms for a 1000-node one, paid between
two flows' starts. `lab down` and `hoplab clean` after a SIGKILL of hoplab
read the processes the state file lists and those this log still has open,
and stop exactly those through each node's executor (a device: after
reconnecting), each only while its PID still has the recorded start time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from hoplab.nodes import rundir
from hoplab.nodes.executor import Process, ProcessId
from hoplab.nodes.procs import Proc

LOG_NAME = "processes.jsonl"


class Record(Protocol):
    """What the readers of the log need of a lab's record (hoplab.lab.state.LabState):
    its directory, where the log is, and the processes it lists itself."""

    @property
    def rundir(self) -> Path: ...

    @property
    def processes(self) -> list[Proc]: ...


class ProcessRecord:
    """The processes of one lab's tests; a lab that has no state file (a unit test's
    plan) records nothing. Several records of one lab (a test's tools, its perf) and
    several hoplab processes may append to one log: each line is one write."""

    def __init__(self, lab: str) -> None:
        self.active = os.path.exists(rundir.record_path(lab))
        self.path = Path(rundir.lab_dir(lab)) / LOG_NAME

    def started(self, proc: Process, role: str) -> None:
        ident = proc.ident
        self._append({"op": "started", "node": ident.node, "pid": ident.pid,
                      "start": ident.start_ticks, "argv": list(proc.argv), "role": role})

    def stopped(self, idents: Iterable[ProcessId]) -> None:
        for i in idents:
            self._append({"op": "stopped", "node": i.node, "pid": i.pid,
                          "start": i.start_ticks})

    def made_dir(self, node: str, path: str) -> None:
        """A run's directory on a device (perf's data, a server's files): a SIGKILL of
        hoplab leaves it in the device's /tmp, which on OpenWrt is its RAM."""
        self._append({"op": "dir", "node": node, "path": path})

    def removed_dir(self, node: str, path: str) -> None:
        self._append({"op": "dir_removed", "node": node, "path": path})

    def will_undo(self, node: str, argv: Sequence[str]) -> None:
        """A command that takes away what a test put on a node (an nft table on a device):
        `lab down` and `hoplab clean` run it unless `undone` follows."""
        self._append({"op": "undo", "node": node, "argv": list(argv)})

    def undone(self, node: str, argv: Sequence[str]) -> None:
        self._append({"op": "undone", "node": node, "argv": list(argv)})

    def _append(self, entry: dict[str, object]) -> None:
        if not self.active:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(entry) + "\n")


def recorded_dirs(state: Record) -> list[tuple[str, str]]:
    """(node, path) of every run directory on a device the log has not seen removed."""
    made: dict[tuple[str, str], None] = {}
    for e in _entries(state):
        try:
            key = (str(e["node"]), str(e["path"]))
        except KeyError:
            continue
        if e.get("op") == "dir":
            made[key] = None
        elif e.get("op") == "dir_removed":
            made.pop(key, None)
    return list(made)


def recorded_undo(state: Record) -> list[tuple[str, list[str]]]:
    """(node, argv) of every undo command the log has not seen run, newest first."""
    todo: dict[tuple[str, tuple[str, ...]], None] = {}
    for e in _entries(state):
        try:
            key = (str(e["node"]), tuple(str(a) for a in e["argv"]))
        except (KeyError, TypeError):
            continue
        if e.get("op") == "undo":
            todo[key] = None
        elif e.get("op") == "undone":
            todo.pop(key, None)
    return [(node, list(argv)) for node, argv in reversed(todo)]


def _entries(state: Record) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        lines = (state.rundir / LOG_NAME).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue  # a line cut short by a SIGKILL while it was written
        if isinstance(e, dict):
            out.append(e)
    return out


def recorded(state: Record) -> list[Proc]:
    """Every process of the lab that may still run: the state file's (wires,
    wireguard-go) and the tests' ones the log has not seen stop."""
    running: dict[tuple[str, int, int], Proc] = {}
    for e in _entries(state):
        if e.get("op") not in ("started", "stopped"):
            continue
        try:
            key = (str(e["node"]), int(e["pid"]), int(e["start"]))
            if e["op"] == "started":
                running[key] = Proc(key[1], key[2], list(e["argv"]), key[0], str(e["role"]))
            else:
                running.pop(key, None)
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a SIGKILL while it was written
    return [*state.processes, *running.values()]
