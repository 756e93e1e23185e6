"""What hoplab created, written down before it is created.

Each lab has a JSON record under /run/hoplab/labs. The record lists the
namespaces first (so a SIGKILL half way still leaves a complete list) and each
process with its kernel start time, so that a reused PID is never killed. It
names its owner the same way (PID and start time), so that `hoplab clean` can
tell a lab in use from one left behind.
"""

from __future__ import annotations

import json
import os
import signal
import time
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hoplab.errors import LabError
from hoplab.lab import where

RUN_DIR = Path(where.RUN_DIR)
LABS_DIR = Path(where.LABS_DIR)
ETC_NETNS = Path("/etc/netns")
STATE_VERSION = 1


@dataclass
class Proc:
    pid: int
    start: int  # /proc/PID/stat field 22: start time in clock ticks since boot
    argv: list[str]
    node: str
    role: str

    def alive(self) -> bool:
        return proc_start_time(self.pid) == self.start


@dataclass
class LabState:
    name: str
    source: str
    status: str = "building"  # building | up | failed
    created: float = field(default_factory=time.time)
    # The process that built the lab and uses it (`hoplab run`, a test, `lab up` while
    # it builds), with its kernel start time: `hoplab clean` leaves a lab alone while
    # this very process lives, and a recycled PID is not mistaken for it.
    owner_pid: int = field(default_factory=os.getpid)
    owner_start: int | None = field(default_factory=lambda: proc_start_time(os.getpid()))
    namespaces: list[str] = field(default_factory=list)
    processes: list[Proc] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    version: int = STATE_VERSION
    # Devices by node: how to reach each again and what to put back (previous sysctl and
    # offload values, teardown commands), written before each change (lab.devices).
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Host NICs moved into the lab's namespaces, with their state before (lab.devices).
    attached: list[dict[str, Any]] = field(default_factory=list)

    def owner_alive(self) -> bool:
        return self.owner_start is not None \
            and proc_start_time(self.owner_pid) == self.owner_start

    def owner_command(self) -> str:
        """The owner's command line, for messages; empty when it cannot be read."""
        try:
            raw = Path(f"/proc/{self.owner_pid}/cmdline").read_bytes()
        except OSError:
            return ""
        return " ".join(a.decode(errors="replace") for a in raw.split(b"\0") if a)[:200]

    @property
    def rundir(self) -> Path:
        return LABS_DIR / self.name

    @property
    def path(self) -> Path:
        return LABS_DIR / f"{self.name}.json"

    def save(self) -> None:
        LABS_DIR.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, self.path)

    def add_process(self, pid: int, argv: list[str], node: str, role: str) -> None:
        start = proc_start_time(pid)
        if start is None:
            raise LabError(f"{role} on {node} (pid {pid}) exited at once")
        self.processes.append(Proc(pid, start, argv, node, role))
        self.save()

    @classmethod
    def load(cls, path: Path) -> LabState:
        try:
            raw = json.loads(path.read_text())
            procs = [Proc(**p) for p in raw.pop("processes", [])]
            # A record from before owners had start times has an owner nobody can vouch for.
            raw.setdefault("owner_start", None)
            return cls(**raw, processes=procs)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            # A record cut short by a crash, or written by another hoplab version.
            raise LabError(f"{path}: unreadable lab state ({exc}); "
                           "hoplab clean removes it") from None


def all_states() -> list[LabState]:
    if not LABS_DIR.is_dir():
        return []
    out = []
    for p in sorted(LABS_DIR.glob("*.json")):
        try:
            out.append(LabState.load(p))
        except LabError:
            continue
    return out


def find(name: str) -> LabState | None:
    path = LABS_DIR / f"{name}.json"
    return LabState.load(path) if path.exists() else None


def proc_start_time(pid: int) -> int | None:
    state = _state_and_start(pid)
    return None if state is None or state[0] == "Z" else state[1]


def _state_and_start(pid: int) -> tuple[str, int] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses; fields follow the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[19])


def stop_process(proc: Proc, grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL, only if the PID still is the process we started."""
    if not proc.alive():
        _reap(proc)
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not proc.alive():
            _reap(proc)
            return
        time.sleep(0.02)
    if proc.alive():
        with suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    _reap(proc)


def _reap(proc: Proc, timeout: float = 2.0) -> None:
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
