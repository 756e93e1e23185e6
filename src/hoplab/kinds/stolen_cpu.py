"""This machine's stolen CPU, and a wait for a quiet second.

On a virtual machine the hypervisor now and then runs other guests on its cores:
/proc/stat's `steal` counts the time this machine's vCPUs were ready and not run. A
frame generator stalled so does not send on time (hoplab-gen's `stalled`), and a stolen
stretch comes in bursts of seconds: this project's machines lost up to 87 % of a core in
a second and 5 to 12 % over whole minutes, then under 1 % for a minute. A trial repeated
straight after a stall met the same burst; waited for a quiet second, the next one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from hoplab.tools.proc_stat import parse_proc_stat

STAT = Path("/proc/stat")
# A second with less than this share of a core stolen is quiet.
QUIET_SHARE = 0.02
SAMPLE_S = 0.25
_TICK = os.sysconf("SC_CLK_TCK")


def stolen_s(stat: str | None = None) -> float:
    """CPU time stolen from this machine since it booted, summed over its CPUs (the
    `cpu` line's steal, hoplab.tools.proc_stat); 0 where the kernel does not count it."""
    total = parse_proc_stat(STAT.read_text() if stat is None else stat).get("all")
    return total.steal / _TICK if total is not None else 0.0


def share(stolen: float, seconds: float) -> float:
    """Stolen CPU time as a share of one core over `seconds` of wall time."""
    return stolen / seconds if seconds > 0 else 0.0


def wait_quiet(limit_s: float, *, seconds: int = 1, read: Callable[[], float] | None = None,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> float | None:
    """Wait until `seconds` seconds in a row pass with less than QUIET_SHARE of a core
    stolen each: the seconds waited, or None if they did not within `limit_s`. On a
    machine that counts no steal (bare metal) the first seconds are quiet."""
    stolen = stolen_s if read is None else read
    began = clock()
    last = (began, stolen())
    quiet = 0
    while True:
        sleep(SAMPLE_S)
        now = (clock(), stolen())
        if now[0] - last[0] >= 1.0:
            quiet = quiet + 1 if share(now[1] - last[1], now[0] - last[0]) < QUIET_SHARE else 0
            if quiet >= seconds:
                return now[0] - began
            last = now
        if now[0] - began >= limit_s:
            return None
