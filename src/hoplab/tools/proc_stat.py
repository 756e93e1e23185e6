"""/proc/stat: cumulative CPU ticks per core, the kernel's ten columns folded into
five states, plus steal:
user = user + nice (both are user-mode time; nice only marks lower priority),
system, irq, softirq, idle = idle + iowait (iowait is idle time while a
disk request is outstanding, not work), and steal (a hypervisor ran another
guest). guest and guest_nice are already included in user and nice by the
kernel and are not added again.
"""

from __future__ import annotations

from dataclasses import dataclass

STATES = ("user", "system", "irq", "softirq", "idle", "steal")


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative clock ticks per folded state."""

    user: int
    system: int
    irq: int
    softirq: int
    idle: int
    steal: int

    def total(self) -> int:
        return self.user + self.system + self.irq + self.softirq + self.idle + self.steal


def parse_proc_stat(text: str) -> dict[str, CpuTimes]:
    """/proc/stat text to times per row: "all" for the total row, "cpu0", "cpu1", ..."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        label, *cols = line.split()
        # Older kernels print fewer columns; missing ones count as zero.
        v = [int(c) for c in cols] + [0] * (10 - len(cols))
        user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
        out["all" if label == "cpu" else label] = CpuTimes(
            user=user + nice, system=system, irq=irq, softirq=softirq, idle=idle + iowait,
            steal=steal)
    return out
