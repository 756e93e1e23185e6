"""The Executor written once on top of a kind's Transport (hoplab.nodes.transport):
stopping processes, which tools a node has, its facts and whether it rebooted.

A kind of node is a class that implements the Transport and inherits Client; callers
see the Executor (hoplab.nodes.executor) and never the kind. Where kinds legitimately
differ the client reads what the kind states (`shares_kernel`, `where`), never its name.

A process is stopped with SIGTERM, then SIGKILL after the grace period, and is looked
at between the two through `signal_recorded(0, ...)`: by PID and start time on the
node, so a process whose output channel is lost (a device's) is still found and one
that left a child holding its output is not waited for.
"""

from __future__ import annotations

import signal as _signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from hoplab.nodes.executor import ExecutorError, Facts, Process, ProcessId
from hoplab.nodes.procs import state_and_start
from hoplab.nodes.ssh_facts import collect_facts, versions_here
from hoplab.nodes.ssh_quote import SH_WHICH
from hoplab.nodes.tools import find
from hoplab.nodes.transport import Transport

POLL_S = 0.05           # how often, at the least, a stopping process is looked at
KILL_WAIT_S = 5.0       # how long SIGKILL may take before a process is said to survive it

# Each tool's path on its line, an empty line where it is missing (POSIX sh alone).
_WHICH = SH_WHICH + 'for t; do w "$t" || echo; done'
# Uptime and boot id with shell builtins alone: no fork on a small device.
_BOOT = "read -r u _ </proc/uptime; b=; read -r b </proc/sys/kernel/random/boot_id; echo $u $b"

Send = Callable[[int, list[ProcessId]], list[ProcessId]]


class Client(Transport):
    """What every kind of node does the same way, on top of its transport."""

    shares_kernel = False
    # A node whose root file system is this machine's (a VM booting a kernel): its own
    # files that run a tool of this machine's ({path: tool}; hoplab.nodes.ssh_facts.
    # versions_here). None: a root of its own.
    shared_root: Mapping[str, str] | None = None
    where: Mapping[str, str] = MappingProxyType({})
    # Reboots: (uptime, boot id) last seen, how many were seen, how many not yet told.
    _boot: tuple[float, str] | None = None
    reboots = 0
    _unreported = 0

    # --- processes ------------------------------------------------------------------------

    def stop(self, proc: Process, grace: float = 2.0) -> None:
        """SIGTERM, then SIGKILL after `grace` s; a process already gone is no error."""
        self.stop_all([proc], grace)

    def stop_all(self, procs: Sequence[Process], grace: float = 2.0) -> None:
        """Stop these processes together (each signal to all, then one wait) and release
        each that ended; ExecutorError naming those that survive SIGKILL, which stay
        tracked (close() tries again), as all do when the node cannot be reached."""
        by_ident = {p.ident: p for p in procs}

        def send(signum: int, idents: list[ProcessId]) -> list[ProcessId]:
            for ident in idents:
                self.signal(by_ident[ident], signum)
            return idents

        left = self._escalate(self._alive(list(by_ident)), send, grace)
        for p in procs:
            if p.ident not in left:
                self.release(p)
        self._survived(left)

    def stop_recorded(self, ident: ProcessId, grace: float = 2.0) -> None:
        """Stop a process a state file recorded: SIGTERM, then SIGKILL, and only while
        that PID still has the recorded start time."""
        if ident.node != self.node:
            raise ValueError(f"{ident} is not a process of node {self.node}")
        self.stop_recorded_all([ident], grace)

    def stop_recorded_all(self, idents: Sequence[ProcessId], grace: float = 2.0) -> None:
        """stop_recorded for several processes at once."""
        def send(signum: int, live: list[ProcessId]) -> list[ProcessId]:
            reached = self.signal_recorded(signum, live)
            return [i for i in live if i in reached]

        self._survived(self._escalate(list(idents), send, grace))

    def _escalate(self, live: list[ProcessId], send: Send, grace: float) -> list[ProcessId]:
        """SIGTERM, then SIGKILL what is left after `grace`; what survives both."""
        for signum, wait in ((_signal.SIGTERM, grace), (_signal.SIGKILL, KILL_WAIT_S)):
            if not live:
                break
            live = send(signum, live)
            deadline = time.monotonic() + wait
            delay = 0.001   # most processes end at once: looked at soon, then less often
            while live:
                live = self._alive(live)
                if not live or time.monotonic() >= deadline:
                    break
                time.sleep(delay)
                delay = min(2 * delay, POLL_S)
        return live

    def _survived(self, live: list[ProcessId]) -> None:
        if live:
            raise ExecutorError(f"node {self.node}: processes survive SIGKILL: "
                                f"{sorted(i.pid for i in live)}")

    def signal_recorded(self, signum: int, idents: Sequence[ProcessId]) -> set[ProcessId]:
        """The default: each process's start time read through read_file, then `kill`
        through run. A PID reused between the two would be hit, so a kind that can look
        and signal in one step on the node does (a namespace, SSH)."""
        alive = set()
        for ident in idents:
            stat = self.read_file(f"/proc/{ident.pid}/stat")
            if stat is None:
                continue
            state, start = state_and_start(stat.decode(errors="replace"))
            if state == "Z" or start != ident.start_ticks:
                continue    # gone, or its PID is another process's now
            if signum:
                self.run(["kill", f"-{signum}", str(ident.pid)], timeout=10)
            alive.add(ident)
        return alive

    def release(self, proc: Process) -> None:
        """The default: nothing held. A kind that tracks its processes forgets it here."""

    def _alive(self, idents: list[ProcessId]) -> list[ProcessId]:
        seen = self.signal_recorded(0, idents) if idents else set()
        return [i for i in idents if i in seen]

    def written(self, proc: Process) -> int | None:
        """None: the node cannot tell cheaply; a kind that can says so."""
        return None

    def pids(self) -> set[int] | None:
        """None: a whole machine, every PID its own; a kind that is part of one says so."""
        return None

    # --- what the node is -----------------------------------------------------------------

    def which(self, tools: Sequence[str]) -> dict[str, str | None]:
        """Each tool's path on the node, None where it is missing: an executable file in
        its PATH, or this machine's lookup (HOPLAB_PERF, the virtualenv's bin, PATH)."""
        if self.shares_kernel:
            return {t: find(t) for t in tools}
        if not tools:
            return {}
        res = self.run(["sh", "-c", _WHICH, "sh", *tools], timeout=10)
        lines = res.stdout.split("\n")
        return {t: (lines[i].strip() or None) if i < len(lines) else None
                for i, t in enumerate(tools)}

    def facts(self) -> Facts:
        """What the node is (hoplab.nodes.ssh_facts, read with a POSIX shell alone); of a
        node that shares this machine's kernel, only where it is: the rest is the host's,
        in every run's metadata."""
        if self.shares_kernel:
            return Facts(values=dict(self.where))
        known = None if self.shared_root is None else versions_here(self.shared_root)
        return collect_facts(self, known=known)

    # --- reboots --------------------------------------------------------------------------

    def check_rebooted(self) -> bool:
        """Whether the node's machine rebooted since the previous call (uptime went back
        or the boot id changed), looking now and counting what the transport's looks at
        a reconnection saw (`look_for_reboot`). Never for a node that shares this
        machine's kernel: hoplab would not be running."""
        if self.shares_kernel:
            return False
        self.look_for_reboot()
        seen, self._unreported = self._unreported, 0
        return seen > 0

    def ignore_reboots(self) -> None:
        """No looks at reconnections: for a one-off command on a node whose boot is
        known (a VM just booted, configured over an executor closed next), where the
        first look would only record what it saw: one more SSH command, 1.4 to 1.8 s of
        each VM of a four-VM lab's configuring under TCG."""
        self.__dict__["watch_reboots"] = False

    def look_for_reboot(self) -> None:
        """Read the uptime and boot id and count a reboot if they went back or changed;
        a transport calls it after each new connection (a device may have rebooted while
        it was away). The first look only records what it saw."""
        if not self.__dict__.get("watch_reboots", True):
            return
        me, looking = threading.get_ident(), self.__dict__.setdefault("_looking", set())
        if me in looking:
            return      # the look's own command, reconnecting
        looking.add(me)
        try:
            out = self.run(["sh", "-c", _BOOT], timeout=10)
        finally:
            looking.discard(me)
        fields = out.stdout.split()
        if out.returncode != 0 or not fields:
            return
        uptime = float(fields[0])
        boot = fields[1] if len(fields) > 1 else ""
        prev = self._boot
        self._boot = (uptime, boot)
        if prev is not None and (uptime < prev[0] or
                                 (bool(boot) and bool(prev[1]) and boot != prev[1])):
            self.reboots += 1
            self._unreported += 1

    def uptime(self) -> float | None:
        """The node's uptime as last read (s)."""
        return self._boot[0] if self._boot else None
