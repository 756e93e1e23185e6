"""A VM's host CPU share (`cpu = "25%"`): its QEMU process in a cgroup of its own under
hoplab's (`hoplab/` at the root of the CPU controller's hierarchy), with a CFS bandwidth
limit of vcpus x share of one host CPU per 100 ms period. cgroup v2's `cpu.max` where
the unified hierarchy has the CPU controller, else v1's `cpu.cfs_quota_us` (a hybrid
set-up, as this machine's: v2 is mounted but the CPU controller is bound to v1).

The cap alone is not the share on a busy machine: with ten runnable tasks on two cores
a VM gets a fifth of a core whatever its cap. So its cgroup, and hoplab's above it,
also weigh 100 times a plain process: the VM gets its share first, and never more (the
cap bounds what the weight can take).

The cgroup's path is in the lab's record before it is made; teardown (lab down, clean
after a SIGKILL) removes it once the QEMU in it has exited."""

from __future__ import annotations

import errno
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from hoplab.errors import CapabilityError

MOUNTINFO = Path("/proc/self/mountinfo")
PERIOD_US = 100_000
OWN = "hoplab"
# 100 times the default weight: cgroup v2's cpu.weight, v1's cpu.shares.
WEIGHT = {2: ("cpu.weight", "10000"), 1: ("cpu.shares", str(100 * 1024))}
# A process that was just killed leaves its cgroup a moment later.
REMOVE_WAIT_S = 5.0


@dataclass(frozen=True)
class Hierarchy:
    root: Path
    version: int        # 1 | 2


def hierarchy(mountinfo: str | None = None) -> Hierarchy | None:
    """Where the CPU controller is: the unified (v2) hierarchy if it has it, else v1's
    `cpu` mount; None if neither is mounted."""
    text = MOUNTINFO.read_text() if mountinfo is None else mountinfo
    v1 = None
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        mount = Path(fields[4])
        fstype, *_src, opts = line.split(" - ", 1)[1].split()
        if fstype == "cgroup2" and "cpu" in _controllers(mount):
            return Hierarchy(mount, 2)
        if fstype == "cgroup" and "cpu" in opts.split(","):
            v1 = v1 or Hierarchy(mount, 1)
    return v1


def _controllers(mount: Path) -> list[str]:
    try:
        return (mount / "cgroup.controllers").read_text().split()
    except OSError:
        return []


def quota_us(share_pct: float, vcpus: int, period_us: int = PERIOD_US) -> int:
    """The CPU time per period the VM's QEMU may use: share_pct of a host CPU per vCPU."""
    return max(1000, round(period_us * vcpus * share_pct / 100))


def path_for(h: Hierarchy, rundir: Path, node: str) -> Path:
    """The node's cgroup: one per lab and node, the run directory in its name (two run
    directories may hold labs of the same name)."""
    tag = hashlib.sha256(str(rundir.resolve()).encode()).hexdigest()[:8]
    return h.root / OWN / f"{rundir.name}.{node}.{tag}"


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def limit(h: Hierarchy, cg: Path, pid: int, quota: int) -> None:
    """Make the cgroup, set its limit and move the QEMU (all its threads) into it."""
    try:
        if h.version == 2:
            # Each level hands the CPU controller down to the next.
            _write(h.root / "cgroup.subtree_control", "+cpu")
            cg.parent.mkdir(exist_ok=True)
            _write(cg.parent / "cgroup.subtree_control", "+cpu")
            cg.mkdir(exist_ok=True)
            _write(cg / "cpu.max", f"{quota} {PERIOD_US}")
        else:
            cg.mkdir(parents=True, exist_ok=True)
            _write(cg / "cpu.cfs_period_us", str(PERIOD_US))
            _write(cg / "cpu.cfs_quota_us", str(quota))
        key, weight = WEIGHT[h.version]
        for d in (cg.parent, cg):
            _write(d / key, weight)
        _write(cg / "cgroup.procs", str(pid))
    except OSError as exc:
        raise CapabilityError(f"cannot limit the VM's CPU share in {cg}: {exc.strerror}"
                              f" (cgroup v{h.version} at {h.root})") from exc


def usage_s(h: Hierarchy, cg: Path, pid: int) -> float:
    """CPU time used by what is in the cgroup: v2's cpu.stat; v1's cpu controller has no
    usage figure (cpuacct does, on its own mount), so the QEMU's own from /proc."""
    if h.version == 2:
        for line in (cg / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def remove(cg: Path) -> str | None:
    """Remove the cgroup once nothing is in it; a warning if it cannot be."""
    deadline = time.monotonic() + REMOVE_WAIT_S
    while True:
        try:
            cg.rmdir()
            return None
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return f"cgroup {cg} could not be removed: {exc.strerror}"
        time.sleep(0.05)
