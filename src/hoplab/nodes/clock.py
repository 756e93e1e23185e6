"""A node's clock offset against this machine, measured over its command channel.

NTP's idea with its minimum-delay filter: this side notes its time t0, asks the
node for its time d, notes t1 when the answer is back. The node read its clock
somewhere in [t0, t1], so its offset is d - (t0 + t1) / 2 within +-(t1 - t0) / 2
(plus the node clock's resolution); of several exchanges the one with the shortest
round trip bounds it best. Offsets are the node's clock minus this machine's.

How the node tells its time, best first (probed once):
- bash's $EPOCHREALTIME (bash 5; microseconds), where the node has bash: no process is
  started per exchange, where each of the others starts one or two (in a VM router
  under TCG a fork and exec costs 50 to 100 ms);
- `date +%s.%N` where date knows %N (GNU coreutils; BusyBox with FEATURE_DATE_NANO);
- BusyBox `adjtimex` (prints time.tv_sec and time.tv_usec: microseconds, or
  nanoseconds where its status has STA_NANO);
- `date +%s` alone (OpenWrt's default BusyBox): seconds only, so this side asks again
  and again until the seconds change: the node's second began between the two
  exchanges around the change, which bounds the offset by their span (~ two round
  trips) plus one timer tick (time(2) turns its seconds at a tick), at the cost of up
  to about one second of asking; where a round trip around the change waited (a busy
  machine), the next seconds' changes too, up to 3 s, and the narrowest is kept.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hoplab.nodes.each import in_each
from hoplab.nodes.executor import LOCAL_MACHINE, Executor, ExecutorError
from hoplab.nodes.ssh_quote import SH_WHICH

END = "@@hoplab-clock@@"
# One timer tick of the slowest common kernel (CONFIG_HZ=100): how late time(2)'s
# seconds may turn (measured here: an edge 2.7 ms after the true second, HZ=250).
COARSE_TICK_S = 0.010
# How long the seconds' edge may be asked for (up to three edges), and how many best
# round trips (plus a tick) the two exchanges around an edge may span for it to be
# taken at once; else the narrowest edge within the budget.
EDGE_BUDGET_S = 3.0
EDGE_SLACK = 4.0
EDGE_MIN_EXCHANGES = 8
_NANO = re.compile(r"\d+\.\d{9}")
_SCRIPT = r'''while read -r r; do
  case $r in
    e) echo "$EPOCHREALTIME";;
    n) date +%s.%N;;
    a) adjtimex 2>/dev/null;;
    s) date +%s;;
    q) exit 0;;
  esac
  echo "@@hoplab-clock@@"
done'''
# bash's answer first: where it tells the time, nothing else is asked.
_PROBE = SH_WHICH + (
    "w bash >/dev/null && env LC_ALL=C bash -c "
    "'case $EPOCHREALTIME in *.*) echo \"e$EPOCHREALTIME\";; *) exit 1;; esac' && exit 0\n"
    "date +%s.%N; w adjtimex >/dev/null && adjtimex 2>/dev/null | grep -c tv_usec")
# bash prints $EPOCHREALTIME with the locale's decimal point: its channel runs in C's.
_EPOCH_SHELL = ["env", "LC_ALL=C", "bash", "-c"]
_EPOCH = re.compile(r"e\d+\.\d{6}")


@dataclass(frozen=True)
class ClockOffset:
    node: str
    offset_s: float          # node's clock minus this machine's
    uncertainty_s: float     # half-width of the interval the offset is certainly in
    rtt_s: float             # the shortest round trip of the exchanges
    method: str              # "epochrealtime", "date-ns", "adjtimex" or "seconds-edge"
    exchanges: int

    def as_metadata(self) -> dict[str, Any]:
        return asdict(self)

    def good_for(self, precision_s: float) -> bool:
        """Whether one-way delays of this precision may be reported on this node: only
        when the offset is known better than that; otherwise RTT only."""
        return self.uncertainty_s < precision_s


def _method(ex: Executor) -> str:
    res = ex.run(["sh", "-c", _PROBE], timeout=10)
    lines = res.stdout.split()
    if lines and _EPOCH.fullmatch(lines[0]):
        return "epochrealtime"
    if lines and _NANO.fullmatch(lines[0]):
        return "date-ns"
    if len(lines) > 1 and lines[1].isdigit() and int(lines[1]) > 0:
        return "adjtimex"
    return "seconds-edge"


# adjtimex(2)'s status bit for a kernel clock discipline in nanoseconds (ADJ_NANO, which
# chrony and ntpd set): the field named tv_usec then holds nanoseconds. Read as
# microseconds, a CI run took 62 ms past a second for 62 s (tests/data/devices).
STA_NANO = 0x2000


def _adjtimex(lines: list[str]) -> float:
    """The time in all that BusyBox's adjtimex prints: its lines are picked here, not
    by a grep there, one process fewer per exchange on the device. Its `status` says
    whether time.tv_usec counts microseconds or, with STA_NANO, nanoseconds."""
    vals = {}
    for line in lines:
        k, _, v = line.partition(":")
        if k.strip() in ("time.tv_sec", "time.tv_usec", "status"):
            vals[k.strip()] = int(v.split()[0])
    per_s = 1_000_000_000 if vals.get("status", 0) & STA_NANO else 1_000_000
    if not 0 <= vals["time.tv_usec"] < per_s:
        raise ValueError(f"time.tv_usec {vals['time.tv_usec']} out of range")
    return vals["time.tv_sec"] + vals["time.tv_usec"] / per_s


def estimate(ex: Executor, exchanges: int = 16, method: str | None = None,
             timeout: float = 5.0) -> ClockOffset:
    """The node's clock offset with its uncertainty (see the module doc). `method`
    forces a way of reading the node's clock (tests)."""
    method = method or _method(ex)
    shell = _EPOCH_SHELL if method == "epochrealtime" else ["sh", "-c"]
    chan = ex.channel([*shell, _SCRIPT], END)
    try:
        if method == "seconds-edge":
            return _edge(ex.node, chan, timeout)
        req = {"epochrealtime": "e", "date-ns": "n"}.get(method, "a")
        res = 1e-9 if method == "date-ns" else 1e-6
        best: tuple[float, float] | None = None     # (rtt, offset)
        for _ in range(exchanges):
            t0 = time.time()
            lines = chan.ask(req, timeout)
            t1 = time.time()
            try:
                d = _adjtimex(lines) if method == "adjtimex" else float(lines[0])
            except (ValueError, IndexError, KeyError) as e:
                raise ExecutorError(f"node {ex.node}: clock answer not understood: "
                                    f"{lines!r}") from e
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, d - (t0 + t1) / 2)
        assert best is not None
        return ClockOffset(ex.node, best[1], best[0] / 2 + res, best[0], method, exchanges)
    finally:
        chan.close()


def _edge(node: str, chan: Any, timeout: float) -> ClockOffset:
    prev: tuple[float, int] | None = None       # (t0 of the exchange, seconds it saw)
    n = 0
    min_rtt = float("inf")
    best: ClockOffset | None = None
    deadline = time.monotonic() + EDGE_BUDGET_S
    while time.monotonic() < deadline:
        t0 = time.time()
        lines = chan.ask("s", timeout)
        t1 = time.time()
        n += 1
        min_rtt = min(min_rtt, t1 - t0)
        try:
            sec = int(lines[0])
        except (ValueError, IndexError) as e:
            raise ExecutorError(f"node {node}: clock answer not understood: {lines!r}") from e
        if prev is not None and sec == prev[1] + 1:
            # The node's second `sec` began after it answered the previous exchange
            # (which it did after prev t0) and before it answered this one (before t1).
            # `date +%s` reads time(2), whose seconds turn at the first timer tick after
            # the true second: up to one tick late (COARSE_TICK_S).
            lo, hi = sec - t1, sec - prev[0] + COARSE_TICK_S
            got = ClockOffset(node, (lo + hi) / 2, (hi - lo) / 2, min_rtt, "seconds-edge", n)
            if best is None or got.uncertainty_s < best.uncertainty_s:
                best = got
            # Round trips about as short as the best one: the tick dominates, take it. A
            # wider span is a round trip that waited (a busy machine or device: 78 ms
            # was seen); the next second's edge, within the budget, may be narrower.
            # Not before a few exchanges: the best round trip of two or three says little.
            if n >= EDGE_MIN_EXCHANGES and t1 - prev[0] <= EDGE_SLACK * min_rtt + COARSE_TICK_S:
                return best
        prev = (t0, sec)
    if best is not None:
        return best
    raise ExecutorError(f"node {node}: the clock's seconds did not change within "
                        f"{EDGE_BUDGET_S:g} s")


def clock_offsets(nodes: Mapping[str, Executor]) -> dict[str, dict[str, Any]]:
    """Each other machine's clock offset against this one, with its uncertainty, by the
    nodes on it: what a run's one-way figures on a device may rely
    on. A namespace shares this machine's clock, so it has none. A machine that does not
    answer gets its error instead (the run itself will say what failed)."""
    by_machine: dict[str, list[str]] = {}
    for name, ex in nodes.items():
        if ex.machine != LOCAL_MACHINE:
            by_machine.setdefault(ex.machine, []).append(name)

    def one(names: list[str]) -> dict[str, Any]:
        try:
            return estimate(nodes[names[0]]).as_metadata()
        except (ExecutorError, TimeoutError, OSError) as exc:
            return {"error": str(exc)}

    # Each machine at once: a run of a lab of two VM routers under TCG spent 7.4 s
    # here one machine after the other (3.7 s each: 16 forks of date in the guest).
    groups = list(by_machine.values())
    out: dict[str, dict[str, Any]] = {}
    for names, got in zip(groups, in_each(groups, one), strict=True):
        for name in names:
            out[name] = {**got, "node": name}
    return out
