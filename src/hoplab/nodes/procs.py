"""Processes of this machine told apart by their start time, so a reused PID is never
taken for the process that had it: its start in clock ticks since boot (field 22 of
/proc/PID/stat), recorded with its PID, is checked before each signal."""

from __future__ import annotations

import os
import signal
import time
from contextlib import suppress
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
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses; fields follow the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


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


def stop_process(proc: Proc, grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL, only if the PID still is the process we started."""
    if not proc.alive():
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not proc.alive():
            _reap(proc.pid)
            return
        time.sleep(0.02)
    if proc.alive():
        with suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    _reap(proc.pid)


def _reap(pid: int) -> None:
    # Only our own children can be reaped; a record from a crashed run is not.
    with suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
