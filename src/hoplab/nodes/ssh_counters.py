"""A device's counters over one long-lived SSH session, with BusyBox alone.

OpenWrt has no Python, its BusyBox has no `date +%N` and no fractional `sleep`,
often no tc, and small-flash images strip /proc/net/snmp and /proc/net/netstat.
So the device runs a loop that waits for a request line and answers with the files
of one sample, then a terminator: this side paces the sampling and stamps each
sample with its own clock (the clock the flows use). The loop is one awk process
for the whole session (BusyBox's awk on OpenWrt), which re-reads the files with
getline and forks nothing. Where tc is installed and takes commands on its input
(`tc -batch -`, JSON), one tc for the session answers each "qdisc show" the loop
writes to it through a FIFO (`tc-batch`): a tc forked per read cost a TCG guest's
router a quarter of a vCPU at 2.5 Hz (below). Elsewhere the loop forks
`tc -s qdisc show` at most every QDISC_INTERVAL_S. Without awk, an ash loop forks one
`head` per sample (or a `cat` per file). Each file comes under a "==> FILE <==" line.

The session has a connection of its own, so the SSH server process that serves it
serves nothing else: the sampler's cost on the device is that server process's CPU
time plus the loop's own and its children's, as a share of one core over the interval
(the core-ticks of the same /proc/stat samples), reported as the `sampler.cpu` series
(%), the session's tc added where it has one. The processes' own time is read in ns
from /proc/PID/schedstat where the device's kernel has it (CONFIG_SCHED_INFO), else, as
the children's always, in clock ticks (fields 14-17 of /proc/PID/stat): at 10 ms a
tick, a cost of 0.5 % is a tick every 2 s, and a 3 s phase read in ticks alone often
shows none of it (0.0).
Measured at 10 Hz on the emulated devices: 0.4 to 0.6 % (OpenWrt-like: BusyBox awk,
no tc), about 1 % (Linux board: mawk, tc at 2.5 Hz); with the ash loop instead, 0.7
and 1.6 to 2.3 %. On a VM router under TCG (Debian 6.12, 2 vCPUs, 5 s of bulk TCP
through it, three runs each): 58.6 to 67.5 % of one vCPU with a tc forked at 2.5 Hz,
37.6 to 45.3 % with the session's tc at 2.5 Hz, 36.5 and 39.9 % with no qdiscs read at
all; and the router forwarded 2.62 Gbit/s with the session's tc against 2.15 with a tc
forked per read (+22 %, `hoplab compare`): the forks took the guest's CPU from its
forwarding.
"""

from __future__ import annotations

import shlex
import time

from hoplab.nodes.executor import Executor, ExecutorError, LineChannel, Snapshot
from hoplab.nodes.ssh_quote import SH_WHICH
from hoplab.tool_table import openwrt
from hoplab.tools.proc_stat import parse_proc_stat
from hoplab.tools.tc import parse_tc_json, parse_tc_text

END = "@@hoplab-end@@"
SAMPLE_TIMEOUT_S = 5.0
COST_SERIES = ("sampler.cpu", "%")
# /proc's clock ticks (USER_HZ): 1/100 s on every Linux architecture OpenWrt builds for.
NS_PER_TICK = 10_000_000
# tc is a fork and exec of a dynamically linked program: 2.7 ms of CPU per call on the
# 2-core test machine, 2.7 % of a core at 10 Hz on its own, over the 2 % budget with the
# rest. So qdiscs are read at most this often; the /proc counters at every tick. The
# session's tc (tc-batch) forks nothing, but its dump is still work on the device: on a
# VM router under TCG (6.12, 2 vCPUs, 5 s of bulk TCP through it, three runs a side) it
# read at every 100 ms tick cost the sampler 47.5 to 50.8 % of a vCPU against 37.6 to
# 45.3, and the router's goodput 9.7 % (2.36 Gbit/s against 2.62).
QDISC_INTERVAL_S = 0.4

_FILES = {"stat": "/proc/stat", "dev": "/proc/net/dev", "snmp": "/proc/net/snmp",
          "netstat": "/proc/net/netstat"}
_PROBE = SH_WHICH + r'''for f; do [ -r "$f" ] && echo "file $f"; done
w head >/dev/null && echo head
if w awk >/dev/null; then
  case $(awk -W version 2>&1 </dev/null) in mawk*) echo mawk;; *) echo awk;; esac
fi
if w tc >/dev/null; then
  if tc -s -j qdisc show >/dev/null 2>&1; then
    echo tc-json
    w mkfifo >/dev/null && w mktemp >/dev/null && w grep >/dev/null &&
      echo 'qdisc show dev lo' | tc -s -j -batch - 2>/dev/null | grep -q '^\[' &&
      echo tc-batch
  else
    echo tc-text
  fi
fi
'''
WHY = {
    "snmp": "/proc/net/snmp is not on the device (small-flash images strip it)",
    "netstat": "/proc/net/netstat is not on the device (small-flash images strip it)",
    "tc": f"tc is not installed on the device (OpenWrt package {openwrt('tc')})",
    "dev": "/proc/net/dev is not on the device",
    "stat": "/proc/stat is not readable on the device",
    "tcp_info": "a device's sockets are not sampled (hoplab reads tcp_info over netlink "
                "in namespaces only)",
}


# The device's side where it has awk (BusyBox's has, on OpenWrt too): one process for
# the session, which re-reads the files with getline per request. Its own /proc/self/stat
# counts the tc runs it forked and waited for (cutime, cstime).
#
# With tc-batch, BEGIN starts the session's tc: `tc -s -j -batch -` reading FIFO i and
# writing FIFO o of a fresh directory, which it removes once both are open (so nothing is
# left on the device however the session ends), and asks it once at once: until the loop
# has opened the FIFOs, tc's shell waits in open(), and an ask then bounds that wait to
# the loop's start. Each answer is one JSON array (a line ending in "]"). The loop's
# end closes i, and tc, reading its end of input, exits; a tc that fails or answers
# otherwise is left (its FIFOs closed) and tc is forked per read from then on. A tc
# found gone is not written to: the write would kill the loop (SIGPIPE). tc is no
# child of the loop's (its shell exits), so its time is read from its own /proc/PID.
AWK_LOOP = r"""
function dump(f) { dumpas(f, f) }
function dumpas(f, name,   l) {
  print "==> " name " <=="; while ((getline l < f) > 0) print l; close(f)
}
function alive(   l, f) {
  f = tcp "/stat"; l = ""; getline l < f; close(f); sub(/^.*\) /, "", l)
  return l != "" && substr(l, 1, 1) != "Z"
}
function ask(   l, out) {
  out = ""
  if (alive()) {
    print "qdisc show" > I; fflush(I)
    while ((getline l < O) > 0) { out = out l "\n"; if (l ~ /\]$/) return out }
  }
  close(I); close(O); tc = "tc-json"; tcp = ""
  return ""
}
BEGIN {
  n = split(ENVIRON["HL_FILES"], F, " ")
  getline s < "/proc/self/stat"; close("/proc/self/stat")
  sub(/^.*\) /, "", s); split(s, a, " "); pp = "/proc/" a[2]
  tc = ENVIRON["HL_TC"]; end = ENVIRON["HL_END"]; tcp = ""
  if (tc == "tc-batch") {
    c = "d=$(mktemp -d /tmp/hoplab-tc.XXXXXX) || exit; if mkfifo \"$d/i\" \"$d/o\"; then "
    c = c "(exec <\"$d/i\" >\"$d/o\" 2>&1; rm -rf \"$d\"; exec tc -s -j -batch -) "
    c = c "</dev/null >/dev/null 2>&1 & echo \"$! $d\"; else rm -rf \"$d\"; fi"
    if ((c | getline r) > 0 && split(r, b, " ") == 2) {
      tcp = "/proc/" b[1]; I = b[2] "/i"; O = b[2] "/o"
      ask()
    } else tc = "tc-json"
    close(c)
  }
}
$0 == "q" { exit }
{
  for (i = 1; i <= n; i++) dump(F[i])
  dump("/proc/self/stat"); dump(pp "/stat")
  dump("/proc/self/schedstat"); dump(pp "/schedstat")
  if (tcp != "") {
    dumpas(tcp "/stat", "tc-batch-stat"); dumpas(tcp "/schedstat", "tc-batch-schedstat")
  }
  if ($0 == "t" && tc == "tc-batch") {
    r = ask()
    if (r != "") { print "==> tc-json <=="; printf "%s", r }
  }
  if ($0 == "t" && (tc == "tc-json" || tc == "tc-text")) {
    print "==> " tc " <=="; fflush()
    system(tc == "tc-json" ? "exec tc -s -j qdisc show 2>&1" : "exec tc -s qdisc show 2>&1")
    print ""
  }
  print end; fflush()
}
"""


def loop_argv(files: list[str], awk: str | None, head: bool, tc: str | None) -> list[str]:
    """The device's side: one sample per request line ("s", or "t" with the qdiscs),
    then END; "q" or the end of input ends it. `awk` is "awk", "mawk" (which reads its
    input in blocks unless told `-W interactive`: a request would wait) or None."""
    if awk:
        opts = ["-W", "interactive"] if awk == "mawk" else []
        return ["env", f"HL_FILES={' '.join(files)}", f"HL_TC={tc or ''}", f"HL_END={END}",
                "awk", *opts, AWK_LOOP]
    return ["sh", "-c", loop_script(files, head, tc)]


def loop_script(files: list[str], head: bool, tc: str | None) -> str:
    """The device's side in ash alone, where there is no awk: a fork per sample."""
    fl = " ".join(shlex.quote(f) for f in files)
    tc = "tc-json" if tc == "tc-batch" else tc  # ash has no FIFO dialogue: a tc per read
    own = "/proc/$$/stat /proc/$PPID/stat /proc/$$/schedstat /proc/$PPID/schedstat"
    if head:
        dump = f'head -n 100000 {fl} {own} 2>/dev/null'
    else:
        dump = (f'for f in {fl} {own}; do echo "==> $f <=="; '
                f'cat "$f" 2>/dev/null; done')
    tcs = ""
    if tc == "tc-json":
        tcs = '[ "$r" = t ] && { echo "==> tc-json <=="; tc -s -j qdisc show 2>&1; echo; }; '
    elif tc == "tc-text":
        tcs = '[ "$r" = t ] && { echo "==> tc-text <=="; tc -s qdisc show 2>&1; }; '
    return f'while read -r r; do [ "$r" = q ] && exit 0; {dump}; {tcs}echo "{END}"; done'


def split_sample(lines: list[str]) -> dict[str, str]:
    """The reply's sections by file name ("/proc/stat", "tc-json", ...)."""
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in lines:
        if line.startswith("==> ") and line.endswith(" <=="):
            cur = out.setdefault(line[4:-4], [])
        elif cur is not None:
            cur.append(line)
    return {k: "\n".join(v).strip("\n") + "\n" for k, v in out.items()}


def spent_ns(stats: list[str], scheds: list[str],
             helper: tuple[str, str] | None = None) -> tuple[bool, int]:
    """CPU time of the loop (with the children it waited for) and of its SSH server, in
    ns, and whether it was read with the scheduler's ns clock (/proc/PID/schedstat's
    first field) rather than in clock ticks: 0.5 % of a core is 0.5 ms per 100 ms
    sample, 15 ms over a 3 s phase, so a tick (10 ms), truncated in each of the four
    fields, often reads none of it. The children's part (tc, the ash loop's forks) has
    ticks only. `stats` and `scheds`: the loop's, then the server's; `helper`: the session's
    tc (tc-batch), its stat and schedstat, no child of the loop's."""
    children = _cpu_ticks(stats[0], children=True) - _cpu_ticks(stats[0], children=False)
    runtimes = [_runtime_ns(s) for s in scheds]
    helper_ticks = 0 if helper is None else _cpu_ticks(helper[0], children=False)
    helper_ns = None if helper is None else _runtime_ns(helper[1])
    if len(runtimes) == 2 and all(r for r in runtimes) and (helper is None or helper_ns):
        return True, (sum(r for r in runtimes if r) + (helper_ns or 0)
                      + children * NS_PER_TICK)
    ticks = (_cpu_ticks(stats[0], children=True) + _cpu_ticks(stats[1], children=False)
             + helper_ticks)
    return False, ticks * NS_PER_TICK


def _runtime_ns(schedstat: str) -> int | None:
    """The first field of /proc/PID/schedstat; None where it is absent, or 0 (a kernel
    without sched_info writes "0 0 0")."""
    try:
        return int(schedstat.split()[0]) or None
    except (IndexError, ValueError):
        return None


def _cpu_ticks(stat_line: str, children: bool) -> int:
    fields = stat_line.rpartition(")")[2].split()
    # After the command name: field 3 is fields[0]; utime..cstime are fields 14-17.
    n = 4 if children else 2
    return sum(int(x) for x in fields[11:11 + n])


class DeviceCounterSource:
    """CounterSource of a device (see module doc)."""

    def __init__(self, ex: Executor, kinds: frozenset[str],
                 files: dict[str, str] | None = None) -> None:
        """`ex`: the device's executor on a connection of its own, which this source
        closes. `files` replaces paths of _FILES (a test names a file the device lacks,
        as a small-flash image lacks /proc/net/snmp)."""
        self.kinds = kinds
        self.paths = {**_FILES, **(files or {})}
        self.ex = ex
        try:
            self._open()
        except BaseException:
            self.ex.close()
            raise
        # ((read in ns?, our CPU time in ns), core ticks, with tc-batch's tc?) of the
        # last sample
        self._prev_cost: tuple[tuple[bool, int], int, bool] | None = None
        self._last_tc = -QDISC_INTERVAL_S
        self.tc_pid: int | None = None

    def _open(self) -> None:
        want = ["stat"]
        if "ifaces" in self.kinds:
            want.append("dev")
        if "tcp" in self.kinds:
            want += ["snmp", "netstat"]
        probe = self.ex.run(["sh", "-c", _PROBE, "sh", *(self.paths[w] for w in want)],
                            timeout=SAMPLE_TIMEOUT_S * 2)
        found = probe.stdout.split("\n")
        self.missing: dict[str, str] = {}
        self.files = [self.paths[w] for w in want if f"file {self.paths[w]}" in found]
        for w in want:
            if self.paths[w] not in self.files:
                self.missing[{"stat": "cpu", "dev": "ifaces", "snmp": "tcp",
                              "netstat": "tcp.lost_retransmit"}[w]] = WHY[w]
        if "tcp_info" in self.kinds:
            self.missing["tcp_info"] = WHY["tcp_info"]
        self.tc: str | None = None
        if "qdisc" in self.kinds:
            self.tc = ("tc-batch" if "tc-batch" in found else
                       "tc-json" if "tc-json" in found else
                       "tc-text" if "tc-text" in found else None)
            if self.tc is None:
                self.missing["qdisc"] = WHY["tc"]
        awk = "mawk" if "mawk" in found else "awk" if "awk" in found else None
        argv = loop_argv(self.files, awk, "head" in found, self.tc)
        self.chan: LineChannel = self.ex.channel(argv, END)

    def read(self) -> Snapshot:
        # "t" asks for the qdiscs too, at most every QDISC_INTERVAL_S (with the session's
        # tc as well: see there).
        now = time.monotonic()
        with_tc = self.tc is not None and now - self._last_tc >= QDISC_INTERVAL_S
        if with_tc:
            self._last_tc = now
        try:
            lines = self.chan.ask("t" if with_tc else "s", SAMPLE_TIMEOUT_S)
        except TimeoutError as e:
            raise ExecutorError(f"node {self.ex.node}: no sample within "
                                f"{SAMPLE_TIMEOUT_S:g} s") from e
        sec = split_sample(lines)
        # The session's tc, while it serves (tc-batch): its PID on the device.
        self.tc_pid = int(sec["tc-batch-stat"].split()[0]) \
            if sec.get("tc-batch-stat", "").strip() else None
        snap = Snapshot(missing=dict(self.missing))
        snap.proc_stat = sec.get(self.paths["stat"])
        snap.net_dev = sec.get(self.paths["dev"])
        if "tcp" in self.kinds:
            snap.snmp = sec.get(self.paths["snmp"])
            snap.netstat = sec.get(self.paths["netstat"])
        # tc-batch answers under tc-json too (and falls back to a tc per read there).
        if self.tc in ("tc-json", "tc-batch") and "tc-json" in sec:
            snap.qdiscs = parse_tc_json(sec["tc-json"])
        elif self.tc == "tc-text" and "tc-text" in sec:
            try:
                snap.qdiscs = parse_tc_text(sec["tc-text"])
            except ValueError as e:
                # A tc that cannot list qdiscs (BusyBox's applet prints its usage): the
                # qdiscs are missing from here on, with why; the other counters go on.
                self.tc = None
                self.missing["qdisc"] = snap.missing["qdisc"] = \
                    f"tc output not understood (BusyBox's tc cannot list qdiscs): {e}"
        self._cost(sec, snap)
        return snap

    def _cost(self, sec: dict[str, str], snap: Snapshot) -> None:
        stats = [v for k, v in sec.items() if k.startswith("/proc/") and k.endswith("/stat")
                 and k != self.paths["stat"]]
        if len(stats) != 2 or snap.proc_stat is None:
            snap.missing["sampler.cpu"] = "the sampler's own /proc/PID/stat was not readable"
            return
        scheds = [v for k, v in sec.items() if k.endswith("/schedstat")]
        helper = ((sec["tc-batch-stat"], sec.get("tc-batch-schedstat", ""))
                  if sec.get("tc-batch-stat", "").strip() else None)
        spent = spent_ns(stats, scheds, helper)
        rows = parse_proc_stat(snap.proc_stat)
        cores = max(1, sum(1 for r in rows if r != "all"))
        total = rows["all"].total() if "all" in rows else 0
        prev, self._prev_cost = self._prev_cost, (spent, total, helper is not None)
        # Both ends read with the same clock (ns, or ticks where schedstat failed once),
        # and both with the session's tc or both without (it ended: its time went too).
        if (prev is None or total <= prev[1] or prev[0][0] != spent[0]
                or prev[2] != (helper is not None)):
            return
        per_core_ns = (total - prev[1]) / cores * NS_PER_TICK
        snap.extra.append((COST_SERIES[0], COST_SERIES[1], None,
                           100.0 * (spent[1] - prev[0][1]) / per_core_ns))

    def close(self) -> None:
        try:
            self.chan.close()
        finally:
            self.ex.close()
