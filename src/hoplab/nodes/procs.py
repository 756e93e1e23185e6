"""Processes of this machine told apart by their start time, so a reused PID is never
taken for the process that had it: its start in clock ticks since boot (field 22 of
/proc/PID/stat), recorded with its PID, is checked before each signal (a namespace's
signal_recorded, hoplab.nodes.netns_exec)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Proc:
    """A process a record names (a lab's state file, a test's process log)."""
    pid: int
    start: int  # /proc/PID/stat field 22: start time in clock ticks since boot
    argv: list[str]
    node: str
    role: str

    def alive(self) -> bool:
        return proc_start_time(self.pid) == self.start


def proc_start_time(pid: int) -> int | None:
    """Its start in clock ticks since boot; None once it is gone or a zombie."""
    state = _state_and_start(pid)
    return None if state is None or state[0] == "Z" else state[1]


def _state_and_start(pid: int) -> tuple[str, int] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return state_and_start(stat)


def state_and_start(stat: str) -> tuple[str, int]:
    """The state letter ("Z": a zombie) and start ticks of a /proc/PID/stat text."""
    # The command name may contain spaces and parentheses; fields follow the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[19])


def written_by(pid: int) -> int | None:
    """wchar of /proc/PID/io: bytes the process has written so far; None once it is gone."""
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def reap(proc: Proc, timeout: float = 2.0) -> None:
    """Reap the recorded process if it has exited and is our child (a record from a
    crashed run is not). A multithreaded one (wireguard-go) is a zombie to /proc as
    soon as its main thread has left, but can be reaped only once its other threads
    have: until then waitpid says it is running, and it was left unreaped for good."""
    deadline = time.monotonic() + timeout
    while _zombie_start(proc.pid) == proc.start:
        try:
            if os.waitpid(proc.pid, os.WNOHANG)[0] or time.monotonic() > deadline:
                return
        except ChildProcessError:
            return
        time.sleep(0.005)


def _zombie_start(pid: int) -> int | None:
    """The start time of PID if it is a zombie (proc_start_time's None), else None."""
    state = _state_and_start(pid)
    return state[1] if state is not None and state[0] == "Z" else None
