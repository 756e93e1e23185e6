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
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hoplab.errors import LabError
from hoplab.nodes import rundir
from hoplab.nodes.procs import Proc, proc_start_time

RUN_DIR = Path(rundir.RUN_DIR)
LABS_DIR = Path(rundir.LABS_DIR)
ETC_NETNS = Path("/etc/netns")
STATE_VERSION = 1


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
    # labgrid places reserved and acquired for the lab's devices, each written before
    # it is reserved: node, place, coordinator, user (as labgrid names us), reservation
    # token (hoplab.lab.devices.labgrid).
    labgrid: list[dict[str, Any]] = field(default_factory=list)

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
        # What asdict() gives, without its deep copy of the summary (plain data already):
        # 13 of a save's 22 ms for a 100-node lab, and lab up saves four times.
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["processes"] = [asdict(p) for p in self.processes]
        tmp.write_text(json.dumps(data, indent=1))
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
