"""A test's profile: perf during its chosen phase, then stacks, top symbols, categories.

A missing or forbidden perf never fails the run: the run is stored with its
profile marked missing and the reason, never with a made-up one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hoplab.errors import HoplabError
from hoplab.lab.paths import routers_crossed
from hoplab.lab.plan import Plan
from hoplab.nodes.executor import LOCAL_MACHINE, Executor
from hoplab.nodes.tracking import ProcessRecord
from hoplab.profile import analyze, fold
from hoplab.profile.record import Recording
from hoplab.profile.stored import FOLDED
from hoplab.record import Metric, RawOutput
from hoplab.spec.experiment import Profile, Test

ATTRIBUTION = ("host-wide: a lab's nodes share one kernel, so kernel work (forwarding, "
               "softirq, in-kernel crypto) cannot be split by node; per node, the samples "
               "of the processes living in it")
# A node that is a whole machine (a device: its executor lists no PIDs of its own) is
# profiled by a perf running on it: every sample is that machine's, none is this one's.
DEVICE_ATTRIBUTION = ("device-wide: perf ran on {nodes} itself and sampled all of its CPUs, "
                      "its kernel's work (forwarding, softirq, in-kernel crypto) and every "
                      "process on it; none of this machine's CPU is in it")
# PIDs of short-lived processes are caught by listing each node this often.
_PID_SCAN_S = 0.5


@dataclass
class ProfileResult:
    raw: list[RawOutput] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def attribution(nodes: list[str], whole: list[str]) -> str:
    """What a profile of `nodes` covers, stored with it and shown wherever it is read:
    this machine's whole kernel for namespaces, the device's for a device (`whole`: the
    nodes that are whole machines)."""
    if whole and set(whole) == set(nodes):
        return DEVICE_ATTRIBUTION.format(nodes=" and ".join(nodes))
    return ATTRIBUTION


def _table(profile: Profile, base_dir: Path) -> Path:
    if profile.categories is None:
        return analyze.DEFAULT_TABLE
    path = Path(profile.categories)
    return path if path.is_absolute() else base_dir / path


class PhaseProfiler:
    def __init__(self, test: Test, profile: Profile, plan: Plan,
                 nodes: Mapping[str, Executor], workdir: Path, base_dir: Path) -> None:
        phase = test.phase(profile.during)
        assert phase is not None  # checked when the experiment was loaded
        self.window = (phase.start_s, phase.end_s)
        self.profile = profile
        self.plan = plan
        # Its categories table: the experiment's own (relative to its file), or hoplab's.
        self.table = _table(profile, base_dir)
        # By default the routers the test's traffic crosses, as the planned routes go.
        self.nodes = (list(profile.nodes) if profile.nodes is not None else
                      routers_crossed(test, plan))
        self.nodes_ex = {n: nodes[n] for n in self.nodes}
        # One perf per machine: the nodes of one kernel share it.
        machines = sorted({ex.machine for ex in self.nodes_ex.values()})
        self.error: str | None = None
        if len(machines) > 1:
            self.error = (f"the profiled nodes ({', '.join(self.nodes)}) are on "
                          f"{len(machines)} machines; profile one machine's nodes per test")
        # Nodes that are whole machines: all the samples of their perf are theirs.
        self.whole = [n for n, ex in self.nodes_ex.items() if ex.pids() is None]
        self.attribution = attribution(self.nodes, self.whole)
        where = next(iter(self.nodes_ex.values()), None) or nodes[next(iter(nodes))]
        self.recording = Recording(workdir / f"{test.name}.perf.data", profile.frequency,
                                   where)
        # perf on a device outlives a SIGKILL of hoplab: the lab's record names it, so
        # `hoplab clean` stops it there.
        self._record = ProcessRecord(plan.lab.name)
        self._next_scan = 0.0
        self._dir_made = False

    def open(self) -> None:
        """Starts perf, its events off, and waits until it is up: before the clock
        starts, as the samplers open theirs (in a TCG guest perf takes 20 s and more)."""
        rec = self.recording
        if self.error is not None:
            return
        if rec.node.machine != LOCAL_MACHINE:
            self._record.made_dir(rec.node.node, str(rec.data.parent))
            self._dir_made = rec.own_dir = True
        try:
            rec.start(noted=lambda p: self._record.started(p, "profile: perf record"),
                      enable=False)
        except HoplabError as e:
            self.error = str(e)

    def tick(self, t: float) -> None:
        """Called with the run clock's time: enables, watches and stops perf."""
        start, end = self.window
        rec = self.recording
        if not rec.started and rec.running() and self.error is None and start <= t < end:
            try:
                rec.enable()
            except HoplabError as e:
                self.error = str(e)
        if rec.started and rec.running():
            if t >= self._next_scan:
                self._scan()
                self._next_scan = t + _PID_SCAN_S
            if t >= end:
                self._scan()
                rec.stop()

    def _scan(self) -> None:
        # perf itself runs in one of the nodes (a namespace it was started in): not theirs.
        perf = {self.recording.proc.ident.pid} if self.recording.proc is not None else set()
        for node, ex in self.nodes_ex.items():
            pids = ex.pids()
            if pids:
                self.recording.pids.setdefault(node, set()).update(pids - perf)

    def stop(self) -> None:
        self.recording.stop()
        if self.recording.proc is not None:
            self._record.stopped([self.recording.proc.ident])

    def finish(self) -> ProfileResult:
        try:
            return self._finish()
        finally:
            rec = self.recording
            if rec.proc is not None:
                # Its files, and the directory made for them (own_dir) if it is then empty
                # (on an emulated device it is this machine's run directory, still in use).
                with contextlib.suppress(Exception):
                    rec.remove()
            elif self._dir_made:
                # perf never started: only the directory is there.
                with contextlib.suppress(Exception):
                    rec.node.run(["rmdir", str(rec.data.parent)], timeout=10)
            if self._dir_made:
                self._record.removed_dir(rec.node.node, str(rec.data.parent))

    def _finish(self) -> ProfileResult:
        self.stop()
        out = ProfileResult()
        md: dict[str, Any] = {"frequency": self.profile.frequency,
                              "phase": self.profile.during, "window_s": list(self.window),
                              "nodes": self.nodes, "attribution": self.attribution}
        out.metadata = md
        reason = self.error or (self.recording.failure() if self.recording.started
                                else "the phase never started")
        if reason is not None:
            md.update(status="missing", reason=reason)
            return out
        try:
            stacks = fold.parse(self.recording.folded(("all", "pid")))
        except HoplabError as e:
            md.update(status="missing", reason=str(e))
            return out
        # The stacks are cut first (the host's, each node's), then read.
        host = fold.without_pids(stacks)
        mine = {node: host if node in self.whole else
                fold.without_pids(fold.only_pids(stacks, self.recording.pids.get(node, ())))
                for node in self.nodes}
        out.raw.append(RawOutput(FOLDED, fold.render(stacks).encode()))
        table = analyze.load_categories(self.table)
        md.update(status="ok", samples=analyze.samples(host),
                  seconds=round(self.recording.stopped - self.recording.started, 3),
                  top=analyze.top_symbols(host, 20))
        cats = analyze.categories(host, table)
        md["categories"] = cats
        out.metrics += [Metric(f"profile.{name}", share, "%") for name, share in cats.items()]
        md["by_node"] = {}
        for node in self.nodes:
            n = analyze.samples(mine[node])
            md["by_node"][node] = {"pids": sorted(self.recording.pids.get(node, ())),
                                   "whole_machine": node in self.whole, "samples": n,
                                   "share_of_host": 100 * n / max(1, analyze.samples(host)),
                                   "top": analyze.top_symbols(mine[node], 10)}
        return out
