"""Sample CPU, interface, qdisc and TCP counters on lab nodes while a test runs.

One thread per target enters the node's namespace with setns() and stays
there, reading /proc/thread-self/net/{dev,snmp,netstat} and dumping qdiscs
over a pyroute2 netlink socket opened inside the namespace; one more thread
reads /proc/stat for the host. Every sample is stamped with time.time() minus
the run's clock zero, so the series share one clock with the flows.

Cost, measured on the 2-core target (getrusage of the process over 10 s, idle
lab) with 5 nodes sampled for ifaces + qdisc + tcp and CPU at 10 Hz: 0.106 CPU
seconds per wall second, i.e. 11 % of one core (5 % of the host), about 2 ms
per node-sample. Per node-sample, thread CPU: qdisc netlink dump and parse
0.68 ms (`tc -s -j qdisc show` instead: 2.2 ms wall per call, a fork each),
snmp + netstat 0.21 ms, net/dev 0.04 ms; the rest is recording and thread
switching. The CPU sampler alone costs 0.005 CPU s per wall second.

A sampler that fails (its namespace was deleted, a read failed) stops, adds a
line to `errors` and keeps what it sampled; the others go on. A deleted
namespace is noticed by comparing /run/netns/NAME with the namespace the thread
is in on every tick, since the thread's own reference keeps the namespace (and
its counters) alive after `ip netns del`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import TracebackType

from pyroute2 import IPRoute

from hoplab.lab.netns import NETNS_DIR, entered
from hoplab.record import Series
from hoplab.samplers import cpu, ifaces, qdisc, tcp, wire
from hoplab.spec.experiment import SAMPLER_KINDS as SAMPLER_KINDS

# SAMPLER_KINDS is the experiment file's vocabulary (spec owns it; named here as the
# list this module samples); all but cpu are per node.
NODE_KINDS = frozenset(SAMPLER_KINDS) - {"cpu"}
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Target:
    node: str                # the lab node name
    netns: str               # its namespace (hoplab-LAB-NODE), see hoplab.lab.plan.netns_name
    kinds: frozenset[str]    # subset of NODE_KINDS (cpu is host-wide)


class _Recorder:
    """Series of one sampler thread, in the order they first appear."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str | None, str | None], Series] = {}

    def add(self, name: str, unit: str, node: str | None, key: str | None, t: float,
            v: float) -> None:
        s = self.series.get((name, node, key))
        if s is None:
            s = self.series[(name, node, key)] = Series(name, unit, [], [], node=node, key=key)
        s.t.append(t)
        s.v.append(v)


def _ns_id(path: str | os.PathLike[str]) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


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
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[tuple[threading.Thread, _Recorder]] = []
        self._result: list[Series] | None = None

    def __enter__(self) -> Samplers:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the threads; return once each has a first sample (or has failed)."""
        if self._threads:
            raise RuntimeError("samplers already started")
        jobs: list[tuple[str, Callable[[_Recorder, threading.Event], None]]] = []
        if self.cpu:
            jobs.append(("cpu", self._run_cpu))
        for tg in self.targets:
            jobs.append((tg.node, partial(self._run_target, tg)))
        readies = []
        for name, job in jobs:
            rec, ready = _Recorder(), threading.Event()
            th = threading.Thread(target=self._guard, args=(name, job, rec, ready),
                                  name=f"hoplab-sampler-{name}", daemon=True)
            self._threads.append((th, rec))
            readies.append(ready)
            th.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        for (th, _), ready in zip(self._threads, readies, strict=True):
            if not ready.wait(max(0.0, deadline - time.monotonic())):
                self._error(f"{th.name}: no first sample after {START_TIMEOUT_S:g} s")

    def stop(self) -> list[Series]:
        """Stop and join the threads and return every series; later calls return the same."""
        if self._result is not None:
            return self._result
        self._stop.set()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        out: list[Series] = []
        for th, rec in self._threads:
            th.join(max(0.0, deadline - time.monotonic()))
            if th.is_alive():
                self._error(f"{th.name}: did not stop within {STOP_TIMEOUT_S:g} s")
            # Copies, so a thread that would not stop cannot change what we return.
            out += [Series(s.name, s.unit, list(s.t), list(s.v), node=s.node, key=s.key)
                    for s in list(rec.series.values())]
        self._result = out
        return out

    def _error(self, msg: str) -> None:
        with self._lock:
            self.errors.append(msg)

    def _guard(self, name: str, job: Callable[[_Recorder, threading.Event], None],
               rec: _Recorder, ready: threading.Event) -> None:
        try:
            job(rec, ready)
        except Exception as exc:
            self._error(f"sampler {name}: {exc}")
        finally:
            ready.set()

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

    def _run_cpu(self, rec: _Recorder, ready: threading.Event) -> None:
        prev = cpu.read_proc_stat()
        wait = self._ticks(ready)
        while wait():
            t, cur = self._now(), cpu.read_proc_stat()
            for row, times in cur.items():
                before = prev.get(row)
                got = cpu.shares(before, times) if before is not None else None
                for state, pct in (got or {}).items():
                    rec.add(f"cpu.{state}", "%", "host", row, t, pct)
            prev = cur

    def _run_target(self, tg: Target, rec: _Recorder, ready: threading.Event) -> None:
        with entered(tg.netns):
            mine = _ns_id("/proc/thread-self/ns/net")
            ipr = IPRoute() if "qdisc" in tg.kinds else None
            try:
                names: dict[int, str] = {}
                wait = self._ticks(ready)
                while True:
                    try:
                        named = _ns_id(NETNS_DIR / tg.netns)
                    except FileNotFoundError:
                        named = None
                    if named != mine:
                        raise RuntimeError(f"namespace {tg.netns} disappeared")
                    self._sample(tg, rec, ipr, names)
                    if not wait():
                        break
            finally:
                if ipr is not None:
                    ipr.close()

    def _sample(self, tg: Target, rec: _Recorder, ipr: IPRoute | None,
                names: dict[int, str]) -> None:
        t = self._now()
        if "ifaces" in tg.kinds:
            for dev, c in ifaces.read_net_dev().items():
                for name, unit, field in ifaces.FIELDS:
                    rec.add(name, unit, tg.node, dev, t, getattr(c, field))
        if ipr is not None:
            for q in _qdiscs(ipr, names):
                for name, unit, field in qdisc.FIELDS:
                    rec.add(name, unit, tg.node, q.key, t, getattr(q, field))
        if "tcp" in tg.kinds:
            for name, value in tcp.read_tcp().items():
                rec.add(name, "segments", tg.node, None, t, value)
        if "wire" in tg.kinds:
            units = {name: unit for name, unit, _ in wire.FIELDS}
            for direction, values in wire.read(tg.netns).items():
                for name, amount in values.items():
                    rec.add(name, units[name], tg.node, direction, t, amount)


def _qdiscs(ipr: IPRoute, names: dict[int, str]) -> list[qdisc.QdiscStats]:
    msgs = list(ipr.get_qdiscs())
    try:
        return qdisc.from_netlink(msgs, names)
    except KeyError:
        # An interface we have not seen (or renamed): refresh the index map once.
        names.clear()
        names.update({link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()})
        # An interface deleted between the two dumps has no name any more: leave it out.
        return qdisc.from_netlink([m for m in msgs if m["index"] in names], names)
