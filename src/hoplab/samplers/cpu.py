"""Per-core CPU time split by state, from /proc/stat, as percent of each interval.

/proc/stat is host-wide: network namespaces share the host's CPUs and the
kernel does not account CPU time per namespace. Softirq time spent forwarding
a lab's packets shows up on whichever core ran it, whatever node the packet
was in. So CPU is sampled once per run and attributed to node "host"; reading
it "per node" would only repeat the same numbers.

The kernel's ten columns are folded into five states, plus steal, by
hoplab.tools.proc_stat; the six shares sum to 100 % of the interval.

/proc/stat counts in USER_HZ ticks (100 per second here), so one 0.1 s sample
of one core rests on about 10 ticks and moves in steps of about 10 %; means
over a load phase of seconds are what to trust, not single samples.
"""

from __future__ import annotations

from hoplab.tools.proc_stat import STATES as STATES
from hoplab.tools.proc_stat import CpuTimes as CpuTimes
from hoplab.tools.proc_stat import parse_proc_stat as parse_proc_stat

PROC_STAT = "/proc/stat"


def shares(before: CpuTimes, after: CpuTimes) -> dict[str, float] | None:
    """Percent of the interval spent in each state; None when no tick elapsed."""
    total = after.total() - before.total()
    if total <= 0:
        return None
    return {s: 100.0 * (getattr(after, s) - getattr(before, s)) / total for s in STATES}


def read_proc_stat() -> dict[str, CpuTimes]:
    with open(PROC_STAT) as f:
        return parse_proc_stat(f.read())
