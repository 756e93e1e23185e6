"""What a bench does with one job: the run it names, by hoplab's own ExperimentRunner,
stored labelled with the bench and its labels, the submitted experiment's id, seed and
order; not run again if the store already holds its ok run (a bench that died between
storing it and marking the job done).

Exactly one ok run per job holds where the run is stored: an ok run is saved as such
only while the bench's attempt is still the job's (the fencing token, hoplab.fleet.queue.beat),
and the store refuses a second ok run of a job (a unique index, schema.ONE_OK_RUN). A run
that fails either is kept, as `superseded`, never counted, and noted for `hoplab fleet`.
A bisection's commit job (hoplab.fleet.bisect.jobs) takes several ok runs of its commit,
so it has the fencing token only (`BenchRuns.fenced`).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hoplab.errors import HoplabError, UsageError
from hoplab.fleet.queue import devices
from hoplab.fleet.queue.beat import CURRENT_JOB
from hoplab.fleet.queue.bundle import Query, unpack
from hoplab.fleet.queue.schema import JOB_LABEL, ONE_OK_RUN_INDEX
from hoplab.nodes import workdir as run_workdir
from hoplab.run.experiment import ExperimentRunner, Job
from hoplab.spec.experiment_loader import load_experiment

if TYPE_CHECKING:
    from hoplab.record import RunRecord
    from hoplab.run.experiment import Progress
    from hoplab.spec.experiment import Experiment
    from hoplab.store import Store



@dataclass(frozen=True)
class JobArgs:
    job_id: int
    experiment_id: str
    bundle_id: str
    seed: int
    order: int
    variant: int
    test: int
    repetition: int
    attempt: int = 0        # the queue's attempt this bench took (the fencing token)

    @classmethod
    def of(cls, job_id: int, args: Mapping[str, Any], attempt: int = 0) -> JobArgs:
        return cls(job_id, str(args["experiment_id"]), str(args["bundle_id"]),
                   int(args["seed"]), int(args["order"]), int(args["variant"]), int(args["test"]),
                   int(args["repetition"]), attempt)


class Attempt(Protocol):
    """A job as a bench took it: its id and the queue's attempt (the fencing token)."""

    @property
    def job_id(self) -> int: ...
    @property
    def attempt(self) -> int: ...


@dataclass
class _Labelled:
    """The store, adding the bench's labels to every run it saves; with a job (`job`,
    and `query` to the queue), an ok run the job has no more is saved superseded."""

    store: Store
    labels: dict[str, str] = field(default_factory=dict)
    job: Attempt | None = None
    query: Query | None = None

    def save_run(self, run: RunRecord) -> int:
        run.labels.update(self.labels)
        if run.status != "ok" or self.job is None or self.query is None:
            return self.store.save_run(run)
        if not self._current():
            return self._superseded(run)
        try:
            return self.store.save_run(run)
        except HoplabError as e:
            if ONE_OK_RUN_INDEX not in str(e.__cause__ or ""):
                raise
            return self._superseded(run)  # stored by another bench since the check

    def _current(self) -> bool:
        assert self.job is not None and self.query is not None
        return bool(self.query(CURRENT_JOB, id=self.job.job_id, attempt=self.job.attempt))

    def _superseded(self, run: RunRecord) -> int:
        assert self.job is not None and self.query is not None
        bench = run.labels.get("bench", "?")
        run.status = "superseded"
        run.error = (f"superseded: job {self.job.job_id} was handed to another bench while "
                     f"bench {bench} was silent (its attempt {self.job.attempt}); kept, "
                     f"never counted")
        run_id = self.store.save_run(run)
        self.query("INSERT INTO hoplab_fleet_superseded (run_id, job_id, attempt, bench) "
                   "VALUES (%(run)s, %(job)s, %(attempt)s, %(bench)s) RETURNING run_id",
                   run=run_id, job=self.job.job_id, attempt=self.job.attempt, bench=bench)
        return run_id


class BenchRuns:
    """The runs of one bench: one experiment's runner at a time, its lab kept up between
    jobs of the same variant (a device's lab is taken down after each run, before its
    lock is let go)."""

    def __init__(self, db_url: str | None, store: Store, bench: str,
                 labels: Mapping[str, str], lab_name: str,
                 progress: Progress | None = None, sets: Sequence[str] = ()) -> None:
        self.db_url = db_url
        # The bench file's overrides (hoplab.fleet.queue.benchfile), on every experiment.
        self.sets = list(sets)
        self.sink = _Labelled(store)
        self.bench, self.labels, self.lab_name = bench, dict(labels), lab_name
        self.progress = progress
        # How long a job waits for a device another run holds (then it fails, saying so).
        self.lock_timeout_s = devices.LOCK_TIMEOUT_S
        self._runner: ExperimentRunner | None = None
        self.query: Query | None = None
        # Named as a run's working directory: `hoplab clean` removes a killed bench's.
        self._bundles = run_workdir.make()

    def new_runner(self, exp: Experiment) -> ExperimentRunner:
        """The runner of a submitted experiment (bench/fleet.py's runs on fake nodes)."""
        return ExperimentRunner(exp, self.sink, self.progress, lab_name=self.lab_name)

    def already_ok(self, job: JobArgs) -> bool:
        return bool(self.sink.store.list_runs(
            {"experiment_id": job.experiment_id, JOB_LABEL: str(job.job_id), "status": "ok"},
            figures=False, limit=1))

    def fenced(self, job: Attempt) -> _Labelled:
        """The store for the runs of a job that labels its own (a commit job): an ok run
        stored once the job was handed on is saved superseded."""
        assert self.query is not None, "bind() first"
        return _Labelled(self.sink.store, {}, job, self.query)

    def bind(self, query: Query) -> None:
        """The bench's connection to the queue, for the submitted files."""
        self.query = query
        self.sink.query = query

    def _runner_for(self, job: JobArgs) -> ExperimentRunner:
        if self._runner is not None and self._runner.experiment_id == job.experiment_id:
            return self._runner
        self.close()
        assert self.query is not None, "bind() first"
        path = unpack(self.query, job.bundle_id, self._bundles)
        # The submitted experiment's seed: a file without one gets a new one each load.
        exp = dataclasses.replace(load_experiment(path, self.sets), seed=job.seed)
        # A matrix key set here would change the variants the jobs are numbered by.
        mixed = sorted({s.split("=", 1)[0] for s in self.sets} & set(exp.matrix))
        if mixed:
            raise UsageError(f"the bench file sets {mixed[0]}, a matrix key of experiment "
                             f"{exp.name}: a bench may not change its variants")
        runner = self.new_runner(exp)
        runner.experiment_id = job.experiment_id
        self._runner = runner
        return runner

    def run(self, job: JobArgs, experiment_labels: Mapping[str, str]) -> RunRecord:
        """The job's run, stored; KeyboardInterrupt once it is stored interrupted."""
        runner = self._runner_for(job)
        if runner.lab_variant not in (None, job.variant):
            runner.close()
        self.sink.labels = {**experiment_labels, **self.labels, "bench": self.bench,
                            JOB_LABEL: str(job.job_id)}
        self.sink.job = job
        lab = runner.exp.variants[job.variant].lab
        keys = devices.device_keys(lab)
        with devices.holding(self.db_url, keys, bench=self.bench, job_id=job.job_id,
                             timeout_s=self.lock_timeout_s):
            try:
                return runner.run_job(Job(job.variant, job.test, job.repetition), job.order)
            finally:
                if keys:
                    runner.close()

    def idle(self) -> None:
        """No job waits: the lab comes down (it is built again for the next one)."""
        self.close()

    def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            runner.close()

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self._bundles, ignore_errors=True)
