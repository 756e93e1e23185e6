"""Sample CPU, interface, qdisc and TCP counters, and TCP flows' own state (tcp_info), on
lab nodes while a test runs.

One thread per target opens its node's counter source (Executor.counters) and
reads it once per tick: a namespace's source enters the namespace once and
reads /proc/thread-self/net/{dev,snmp,netstat} and a netlink qdisc dump there;
a device's keeps one SSH session and is asked for one sample per tick. One
more thread reads /proc/stat for the host. Every sample is stamped with
time.time() minus the run's clock zero, on this machine, so the series share
one clock with the flows.

A node that has CPUs of its own (a device) gives its /proc/stat in its
snapshot, recorded as cpu.* of that node; a namespace's CPU is the host's.
What a node cannot give is named in its snapshot's `missing` and noted once
in `missing` here ("node: series: reason"), never recorded as zero.

Cost, measured on the 2-core target (getrusage of the process over 10 s, idle
lab) with 5 nodes sampled for ifaces + qdisc + tcp and CPU at 10 Hz: 0.106 CPU
seconds per wall second, i.e. 11 % of one core (5 % of the host), about 2 ms
per node-sample. Per node-sample, thread CPU: qdisc netlink dump and parse
0.68 ms (`tc -s -j qdisc show` instead: 2.2 ms wall per call, a fork each),
snmp + netstat 0.21 ms, net/dev 0.04 ms; the rest is recording and thread
switching. The CPU sampler alone costs 0.005 CPU s per wall second.

A sampler that fails (its namespace was deleted, a device stopped answering)
stops, adds a line to `errors` and keeps what it sampled; the others go on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType

# The samplers by their full names: `from hoplab.samplers import ...` names the package
# too, whose __init__ loads this module on first use (a cycle, tests/unit/test_layers.py).
import hoplab.samplers.cpu as cpu
import hoplab.samplers.ifaces as ifaces
import hoplab.samplers.qdisc as qdisc
import hoplab.samplers.tcp as tcp
import hoplab.samplers.tcp_info as tcp_info
import hoplab.samplers.wire as wire
from hoplab import metrics
from hoplab.nodes.executor import Executor, Snapshot
from hoplab.record import Series
from hoplab.spec.experiment import SAMPLER_KINDS as SAMPLER_KINDS

# SAMPLER_KINDS is the experiment file's vocabulary (spec owns it; named here as the
# list this module samples); all but cpu are per node.
NODE_KINDS = frozenset(SAMPLER_KINDS) - {"cpu"}
# A bound, not a wait: opening a sampler in a VM guest just booted under TCG (an SSH
# session, the sampler's first exec over 9p) took more than 10 s at load 10 here.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Target:
    node: str                # the lab node name (a wire's short name, w.INDEX)
    executor: Executor       # where its counters are read
    kinds: frozenset[str]    # subset of NODE_KINDS (cpu of the host is a thread of its own)
    # The flows whose data this node sends, for tcp_info: how to find each one's socket.
    flows: tuple[tcp_info.FlowSocket, ...] = ()


class _Recorder:
    """Series of one sampler thread, in the order they first appear."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str | None, str | None, str | None], Series] = {}
        # When the newest recorded sample began to be read (the run's clock).
        self.began: float | None = None

    def add(self, name: str, unit: str, node: str | None, key: str | None, t: float,
            v: float, flow: str | None = None) -> None:
        s = self.series.get((name, node, key, flow))
        if s is None:
            s = self.series[(name, node, key, flow)] = Series(name, unit, [], [], node=node,
                                                              key=key, flow=flow)
        s.t.append(t)
        s.v.append(v)


class Samplers:
    def __init__(self, targets: Sequence[Target], *, cpu: bool, clock_zero: float,
                 interval_s: float = 0.1) -> None:
        if interval_s <= 0:
            raise ValueError(f"sampling interval must be positive, not {interval_s}")
        for tg in targets:
            if not tg.kinds <= NODE_KINDS:
                bad = ", ".join(sorted(tg.kinds - NODE_KINDS))
                raise ValueError(f"sampler {tg.node}: unknown kind(s) {bad}")
        self.targets = tuple(targets)
        self.cpu = cpu
        self.clock_zero = clock_zero
        self.interval_s = interval_s
        self.errors: list[str] = []
        # Series a node could not give, "node: what: reason", each said once.
        self.missing: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._go = threading.Event()
        self._threads: list[tuple[threading.Thread, _Recorder, _Gate]] = []
        self._started = False
        self._result: list[Series] | None = None

    def __enter__(self) -> Samplers:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def open(self) -> None:
        """Start the threads and let each open its node's counter source (enter a
        namespace, open a session to a device); return once every one is open (or has
        failed). Nothing is sampled before start(), so opening, which may take a
        fraction of a second, can come before the run's clock zero."""
        if self._threads:
            raise RuntimeError("samplers already opened")
        jobs: list[tuple[str, Callable[[_Recorder, _Gate], None]]] = []
        if self.cpu:
            jobs.append(("cpu", self._run_cpu))
        for tg in self.targets:
            jobs.append((tg.node, partial(self._run_target, tg)))
        for name, job in jobs:
            rec, gate = _Recorder(), _Gate()
            th = threading.Thread(target=self._guard, args=(name, job, rec, gate),
                                  name=f"hoplab-sampler-{name}", daemon=True)
            self._threads.append((th, rec, gate))
            th.start()
        self._await("opened", "not open")

    def start(self) -> None:
        """Start sampling (opening first if open() was not called); return once each
        thread has a first sample (or has failed)."""
        if self._started:
            raise RuntimeError("samplers already started")
        if not self._threads:
            self.open()
        self._started = True
        self._go.set()
        self._await("ready", "no first sample")

    def _await(self, what: str, fault: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        for th, _, gate in self._threads:
            if not getattr(gate, what).wait(max(0.0, deadline - time.monotonic())):
                self._error(f"{th.name}: {fault} after {START_TIMEOUT_S:g} s")

    def stop(self) -> list[Series]:
        """Stop and join the threads and return every series; later calls return the same."""
        if self._result is not None:
            return self._result
        self._stop.set()
        self._go.set()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        out: list[Series] = []
        for th, rec, _ in self._threads:
            th.join(max(0.0, deadline - time.monotonic()))
            if th.is_alive():
                self._error(f"{th.name}: did not stop within {STOP_TIMEOUT_S:g} s")
            # Copies, so a thread that would not stop cannot change what we return.
            out += [Series(s.name, s.unit, list(s.t), list(s.v), node=s.node, key=s.key,
                           flow=s.flow) for s in list(rec.series.values())]
        self._result = out
        return out

    def sampled_since(self, t: float, timeout: float) -> bool:
        """Wait until each running sampler has recorded a sample it began to read at `t`
        or later (the run's clock, as the series'): counters that include what the
        caller did before `t`. False after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            behind = [rec for th, rec, _ in self._threads
                      if th.is_alive() and (rec.began is None or rec.began < t)]
            if not behind:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(self.interval_s / 4, 0.01))

    def _error(self, msg: str) -> None:
        with self._lock:
            self.errors.append(msg)

    def _guard(self, name: str, job: Callable[[_Recorder, _Gate], None],
               rec: _Recorder, gate: _Gate) -> None:
        try:
            job(rec, gate)
        except Exception as exc:
            self._error(f"sampler {name}: {exc}")
        finally:
            gate.opened.set()
            gate.ready.set()

    def _begin(self, gate: _Gate) -> bool:
        """Say this thread is open and wait for start(); False when stopped first."""
        gate.opened.set()
        self._go.wait()
        return not self._stop.is_set()

    def _ticks(self, ready: threading.Event) -> Callable[[], bool]:
        """A function that sleeps until the next tick; False once stop() was called.
        Ticks missed while a sample was slow are skipped, not made up."""
        start = time.monotonic()
        n = 0

        def wait() -> bool:
            nonlocal n
            ready.set()
            n = max(n + 1, int((time.monotonic() - start) / self.interval_s) + 1)
            return not self._stop.wait(max(0.0, start + n * self.interval_s - time.monotonic()))

        return wait

    def _now(self) -> float:
        return time.time() - self.clock_zero

    def _run_cpu(self, rec: _Recorder, gate: _Gate) -> None:
        if not self._begin(gate):
            return
        prev = cpu.read_proc_stat()
        wait = self._ticks(gate.ready)
        while wait():
            t, cur = self._now(), cpu.read_proc_stat()
            for row, times in cur.items():
                before = prev.get(row)
                got = cpu.shares(before, times) if before is not None else None
                for state, pct in (got or {}).items():
                    rec.add(f"cpu.{state}", "%", "host", row, t, pct)
            prev = cur
            rec.began = t

    def _run_target(self, tg: Target, rec: _Recorder, gate: _Gate) -> None:
        # Opened in this thread: a namespace's source enters the namespace here.
        src = tg.executor.counters(tg.kinds)
        try:
            if not self._begin(gate):
                return
            state = _TargetState(tcp_info.Picker(tg.flows))
            wait = self._ticks(gate.ready)
            while True:
                began = self._now()
                snap = src.read()
                self._sample(tg, rec, snap, state)
                rec.began = began
                if not wait():
                    break
        finally:
            src.close()

    def _sample(self, tg: Target, rec: _Recorder, snap: Snapshot, state: _TargetState) -> None:
        t = self._now()
        node = tg.node
        if snap.net_dev is not None:
            for dev, c in ifaces.parse_net_dev(snap.net_dev).items():
                for name, unit, field in ifaces.FIELDS:
                    rec.add(name, unit, node, dev, t, getattr(c, field))
        for q in snap.qdiscs or ():
            for name, unit, field in qdisc.FIELDS:
                rec.add(name, unit, node, q.key, t, getattr(q, field))
        if snap.snmp is not None:
            for name, value in tcp.tcp_counters(snap.snmp, snap.netstat).items():
                rec.add(name, "segments", node, None, t, value)
        if snap.proc_stat is not None:
            cur = cpu.parse_proc_stat(snap.proc_stat)
            for row, times in cur.items():
                before = state.cpu.get(row)
                got = cpu.shares(before, times) if before is not None else None
                for st, pct in (got or {}).items():
                    rec.add(f"cpu.{st}", "%", node, row, t, pct)
            state.cpu = cur
        for f, sock in state.sockets.pick(snap.sockets or ()):
            for name, reading in tcp_info.values(sock):
                rec.add(name, metrics.unit(name), node, f.key, t, reading, flow=f.flow)
        extra = [*wire.series(snap.wire), *snap.extra] if snap.wire is not None else snap.extra
        for name, unit, key, amount in extra:
            rec.add(name, unit, node, key, t, amount)
        for what, reason in snap.missing.items():
            if what not in state.missing:
                state.missing.add(what)
                with self._lock:
                    self.missing.append(f"{node}: {what}: {reason}")


class _Gate:
    """A sampler thread's two steps: its source is open; it has a first sample."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.ready = threading.Event()


class _TargetState:
    """What one target's thread keeps between samples."""

    def __init__(self, sockets: tcp_info.Picker) -> None:
        self.cpu: dict[str, cpu.CpuTimes] = {}
        self.missing: set[str] = set()
        self.sockets = sockets
