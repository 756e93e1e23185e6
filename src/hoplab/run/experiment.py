"""Run a whole experiment: variants x tests x repetitions, in a seeded random order.

Each run is written to the store the moment it ends, so Ctrl-C (or a crash) in
repetition 7 keeps runs 1 to 6; the run that was interrupted is stored too,
marked "interrupted", with what stopped it. Any other failure of a run (a setup
command that hangs, a tool that cannot start, a fault of ours) is stored as
"failed" with its error, and the experiment goes on with the next run. A
variant's lab is built when the next run needs it and taken down when the next
run needs another one; nothing is left up when this returns or raises.
"""

from __future__ import annotations

import dataclasses
import random
import secrets
import shutil
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hoplab import kind_registry as registry
from hoplab.errors import Cancelled, CapabilityError, HoplabError
from hoplab.kinds import flow_tool
from hoplab.kinds.device_tools import test_tools
from hoplab.lab import build
from hoplab.lab.build import UpResult
from hoplab.lab.caps import Capabilities, probe
from hoplab.lab.devices import survey
from hoplab.lab.devices.labels import device_labels
from hoplab.lab.ready import node_settings, run_setup
from hoplab.lab.signals import shielded
from hoplab.lab.summary import summarize
from hoplab.nodes import workdir as run_workdir
from hoplab.nodes.clock import clock_offsets
from hoplab.nodes.executor import Executor
from hoplab.nodes.reboots import reboots
from hoplab.nodes.registry import close_all, executors, kind_of
from hoplab.record import MEASUREMENT_VERSION, DuplicateMetric, RunRecord, check_metric_keys
from hoplab.run.execute import TestResult, run_test
from hoplab.run.metadata import host_metadata
from hoplab.run.one_way import gate as gate_one_way
from hoplab.spec.experiment import Experiment, Test, Variant


class RunSink(Protocol):
    def save_run(self, run: RunRecord) -> int: ...


@dataclass(frozen=True)
class Job:
    variant: int
    test: int
    repetition: int


@dataclass
class Progress:
    """Callbacks for a front end; all optional."""

    start_run: Callable[[int, Job, Variant, Test], None] = lambda _n, _j, _v, _t: None
    tick: Callable[[float], None] = lambda _t: None
    end_run: Callable[[RunRecord], None] = lambda _r: None
    note: Callable[[str], None] = lambda _m: None


def schedule(exp: Experiment) -> list[Job]:
    jobs = [Job(v, t, r + 1) for v, variant in enumerate(exp.variants)
            for t in range(len(variant.tests)) for r in range(exp.repeat)]
    if exp.shuffle:
        random.Random(exp.seed).shuffle(jobs)
    return jobs


DeviceTools = tuple[dict[str, set[str]], dict[str, str]]


def check_machine(exp: Experiment, caps: Capabilities) -> list[DeviceTools]:
    """Refuse before anything runs: a missing tool, a variant's lab this kernel cannot
    build, or a device without a tool its tests run there. What the tests run is the
    kinds' to say, and is asked first; what the lab can be, the lab's, after. Returns
    what each variant's tests run on its devices (kinds/device_tools.py), which its
    lab's build checks again."""
    on_devices = []
    for v in exp.variants:
        on_devices.append(test_tools(v.lab, v.tests))
    kinds = {f.kind for v in exp.variants for t in v.tests for f in t.flows}
    for k in sorted(kinds):
        # The flow's kind names its tool and the Debian package that provides it.
        need = flow_tool(k)
        for tool, package in ((need.tool, need.package), *need.needs):
            if shutil.which(tool) is None:
                raise CapabilityError(f"{exp.source}: {k} flows need {tool}, which is not "
                                      f"installed: apt-get install {package} (or make setup)")
    if shutil.which("ss") is None:
        raise CapabilityError("ss is missing: apt-get install iproute2")
    for v in exp.variants:
        try:
            build.preflight(v.lab, caps)
        except CapabilityError as e:
            raise CapabilityError(f"{e} (variant {v.label()})") from None
    for v, (tools, why) in zip(exp.variants, on_devices, strict=True):
        survey.check_devices(v.lab, tools, why)
    return on_devices


def measurement_version(kind: str) -> int:
    """The measurement version a run of `kind` carries: the kind's own, or hoplab's."""
    return registry.get(kind).measurement_version or MEASUREMENT_VERSION


def _interrupted_by(e: KeyboardInterrupt) -> str:
    # hoplab.lab.signals raises KeyboardInterrupt("signal N") for SIGTERM and SIGHUP.
    what = str(e)
    if (what.startswith("signal ") and what[7:].isdigit()
            and int(what[7:]) != signal.SIGINT):
        return f"interrupted by {signal.Signals(int(what[7:])).name}"
    return "interrupted by the user (Ctrl-C)"


class ExperimentRunner:
    def __init__(self, exp: Experiment, sink: RunSink, progress: Progress | None = None,
                 caps: Capabilities | None = None, lab_name: str | None = None) -> None:
        self.exp = exp
        self.sink = sink
        self.progress = progress or Progress()
        self.caps = caps or probe()
        self.experiment_id = secrets.token_hex(6)
        self.lab_name = lab_name or "x" + secrets.token_hex(4)
        self.records: list[RunRecord] = []
        self._up: tuple[int, UpResult, dict[str, Any]] | None = None
        self._nodes: dict[str, Executor] = {}
        # Each device's boot id and uptime as the previous run saw them.
        self._boots: dict[str, tuple[str, float]] = {}
        self._host = host_metadata(self.caps)
        # The checks, made once before the first run, and what they asked of the kinds:
        # each variant's tools on its devices, each test kind's measurement version.
        self._checked = False
        self._device_tools: list[DeviceTools] = []
        self._versions: dict[str, int] = {}
        self._workdir: Path | None = None

    def _lab_for(self, index: int) -> tuple[UpResult, dict[str, Any]]:
        if self._up is not None and self._up[0] == index:
            return self._up[1], self._up[2]
        self._down()
        variant = self.exp.variants[index]
        lab = dataclasses.replace(variant.lab, name=self.lab_name)
        self.progress.note(f"building the lab for {variant.label()}")
        # build.up removes what it built if it fails; once it returns, _down owns the lab.
        needs, why = self._device_tools[index]
        self._up = (index, build.up(lab, caps=self.caps, tools=needs, why=why), {})
        up = self._up[1]
        for warning in up.warnings:
            self.progress.note(f"warning: {warning}")
        # A node this lab booted (a VM) is a new machine: its boot id is not a reboot.
        for name, info in up.state.summary.get("nodes", {}).items():
            if kind_of(name, info).builds == "qemu":
                self._boots.pop(name, None)
        self._nodes = executors(up.plan)
        run_setup(variant, up.plan, self._nodes, Path(self.exp.source).resolve().parent)
        self._up = (index, up, node_settings(up.plan, self._nodes))
        return up, self._up[2]

    def _down(self) -> None:
        if self._up is not None:
            # A second Ctrl-C, or a SIGTERM, must not leave the lab half taken down.
            with shielded():
                self._up = None
                nodes, self._nodes = self._nodes, {}
                close_all(nodes)
                for warning in build.down(self.lab_name):
                    self.progress.note(f"warning: {warning}")

    def _record(self, job: Job, order: int, test: Test, started: float) -> RunRecord:
        variant = self.exp.variants[job.variant]
        return RunRecord(
            experiment=self.exp.name, test=test.name, kind=test.kind,
            repetition=job.repetition, variant=dict(variant.values),
            labels=dict(self.exp.labels), started_at=started, seed=self.exp.seed,
            order=order, experiment_id=self.experiment_id,
            measurement_version=self._versions[test.kind],
            # The lab's name from the first: a run cut short while its lab came up
            # names what `hoplab clean LAB` takes down.
            metadata={**self._host, "experiment_file": self.exp.source,
                      "lab_file": self.exp.lab_source, "lab_name": self.lab_name,
                      "test": {"options": test.options,
                               "flows": [f.as_record() for f in test.flows],
                               "phases": [dataclasses.asdict(p) for p in test.phases],
                               "samplers": dataclasses.asdict(test.samplers)},
                      "matrix": {k: list(v) for k, v in self.exp.matrix.items()}})

    def _one(self, order: int, job: Job, workdir: Path) -> RunRecord:
        variant = self.exp.variants[job.variant]
        test = variant.tests[job.test]
        self.progress.start_run(order, job, variant, test)
        rec = self._record(job, order, test, time.time())
        cut: list[TestResult] = []
        try:
            up = self._lab_up_for(rec, job)
            result: TestResult = run_test(test, up.plan, workdir, self.progress.tick,
                                          Path(self.exp.source).resolve().parent,
                                          nodes=self._nodes, interrupted=cut.append)
        except KeyboardInterrupt as e:
            with shielded():
                if cut:  # what it measured before the interrupt is stored with it
                    rec = self._measured(rec, test, cut[0])
                rec.status, rec.error = (("cancelled", str(e)) if isinstance(e, Cancelled)
                                         else ("interrupted", _interrupted_by(e)))
                rec.duration_s = time.time() - rec.started_at
                self._save(rec)
            raise
        except Exception as e:  # any failure fails this run, not the others
            # A HoplabError is a sentence for the user; anything else is a fault of ours or
            # of the machine, kept with its traceback so it can be reported.
            rec.status = "failed"
            rec.error = str(e) if isinstance(e, HoplabError) else f"{type(e).__name__}: {e}"
            if not isinstance(e, HoplabError):
                rec.metadata["traceback"] = traceback.format_exc(limit=20)
            rec.duration_s = time.time() - rec.started_at
            # The lab may be half set up: the next run gets a fresh one.
            self._down()
            return self._save(rec)
        return self._save(self._measured(rec, test, result))

    def _lab_up_for(self, rec: RunRecord, job: Job) -> UpResult:
        """The job's variant's lab, up; what the run's record says of it and its nodes."""
        up, settings = self._lab_for(job.variant)
        rec.metadata["lab"] = summarize(up.plan)
        rec.metadata["nodes"] = settings
        # A device's model and firmware label its runs, unless the experiment gives them.
        for key, value in device_labels(up.plan.lab, settings).items():
            rec.labels.setdefault(key, value)
        # Each device's clock against this machine's, measured for this run.
        rec.metadata["clocks"] = clock_offsets(self._nodes)
        rebooted = reboots(self._nodes, settings, self._boots)
        if rebooted:
            rec.metadata["rebooted"] = rebooted
            self.progress.note(f"warning: {', '.join(rebooted)} rebooted; see run "
                               f"metadata 'rebooted'")
        return up

    def _measured(self, rec: RunRecord, test: Test, result: TestResult) -> RunRecord:
        """The run's record with what its test measured, failed if the test said so."""
        rec.started_at, rec.duration_s = result.started_at, result.duration_s
        rec.metrics, rec.series, rec.raw = result.metrics, result.series, result.raw
        # One-way delays between two clocks: corrected by the offsets measured above, or
        # dropped where those are not known well enough (hoplab.run.one_way).
        one_way = gate_one_way(test.flows, {n: ex.machine for n, ex in self._nodes.items()},
                               rec.metadata.get("clocks", {}), rec.metrics, rec.series)
        if one_way:
            rec.metadata["one_way"] = one_way
            for flow, said in one_way.items():
                if said.startswith("RTT only"):
                    self.progress.note(f"flow {flow}: {said}")
        rec.metadata.update(result.notes)
        if result.profile is not None:
            rec.metadata["profile"] = result.profile
        try:
            check_metric_keys(rec)
        except DuplicateMetric as e:
            # A fault of ours, not of the network: the store would refuse the run, so it is
            # kept failed with its raw outputs and series, which can be parsed again.
            rec.metrics = []
            result.errors.append(f"{e} (a fault in hoplab; the raw outputs are kept)")
        if result.errors:
            rec.status, rec.error = "failed", "; ".join(result.errors)
        return rec

    def _save(self, rec: RunRecord) -> RunRecord:
        self.sink.save_run(rec)
        self.records.append(rec)
        self.progress.end_run(rec)
        return rec

    def run(self) -> list[RunRecord]:
        """Every run of the experiment, in its order, each through run_job; nothing is
        left up when this returns or raises."""
        # The lab `hoplab lab up` built from this lab file holds the NICs and devices the
        # runs need: taken down for them, built again after.
        handed = build.hand_over(self.exp.variants[0].lab)
        if handed is not None:
            self.progress.note(f"lab {handed.name} is up: taken down for the runs, built "
                               f"again after them")
        try:
            self._check()
            for order, job in enumerate(schedule(self.exp)):
                if order and self.exp.pause_s:
                    time.sleep(self.exp.pause_s)
                self.run_job(job, order)
        finally:
            try:
                self.close()
            finally:
                if handed is not None:
                    for warning in build.take_back(handed):
                        self.progress.note(f"warning: {warning}")
        return self.records

    def _check(self) -> None:
        """Before the first run, once: what check_machine refuses; what the kinds say
        each run needs is asked here, and handed down to the runs."""
        if not self._checked:
            self._device_tools = check_machine(self.exp, self.caps)
            self._versions = {t.kind: measurement_version(t.kind)
                              for v in self.exp.variants for t in v.tests}
            self._checked = True

    def run_job(self, job: Job, order: int) -> RunRecord:
        """One given run, the `order`th of the experiment (a fleet's job, or one of
        `run`'s), in the order of its steps: the checks (before the first run), then the
        variant's lab up, the test, the record stored. The lab stays up for the next job
        of the same variant until `close`; KeyboardInterrupt is raised after the run is
        stored interrupted."""
        self._check()
        if self._workdir is None:
            self._workdir = run_workdir.make()
        return self._one(order, job, self._workdir)

    @property
    def lab_variant(self) -> int | None:
        """The variant whose lab is up, if one is."""
        return None if self._up is None else self._up[0]

    def close(self) -> None:
        """Take down the lab run_job left up, and remove its working directory."""
        try:
            self._down()
        finally:
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None
