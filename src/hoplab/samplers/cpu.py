"""Per-core CPU time split by state, from /proc/stat, as percent of each interval.

/proc/stat is host-wide: network namespaces share the host's CPUs and the
kernel does not account CPU time per namespace. Softirq time spent forwarding
a lab's packets shows up on whichever core ran it, whatever node the packet
was in. So CPU is sampled once per run and attributed to node "host"; reading
it "per node" would only repeat the same numbers.

The kernel's ten columns are folded into five states, plus steal:
user = user + nice (both are user-mode time; nice only marks lower priority),
system, irq, softirq, idle = idle + iowait (iowait is idle time while a
disk request is outstanding, not work), and steal (a hypervisor ran another
guest). guest and guest_nice are already included in user and nice by the
kernel and are not added again. The six shares sum to 100 % of the interval.

/proc/stat counts in USER_HZ ticks (100 per second here), so one 0.1 s sample
of one core rests on about 10 ticks and moves in steps of about 10 %; means
over a load phase of seconds are what to trust, not single samples.
"""

from __future__ import annotations

from dataclasses import dataclass

PROC_STAT = "/proc/stat"
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


def shares(before: CpuTimes, after: CpuTimes) -> dict[str, float] | None:
    """Percent of the interval spent in each state; None when no tick elapsed."""
    total = after.total() - before.total()
    if total <= 0:
        return None
    return {s: 100.0 * (getattr(after, s) - getattr(before, s)) / total for s in STATES}


def read_proc_stat() -> dict[str, CpuTimes]:
    with open(PROC_STAT) as f:
        return parse_proc_stat(f.read())
