"""A bench's side of `hoplab bisect run --fleet`: the job "measure commit SHA".

The bench checks the commit out in a git worktree of the job's own, in a run directory
of the bench's process (hoplab.nodes.workdir: `hoplab clean` removes a killed bench's),
so other benches' worktrees and the repository's own checkout stay as they are; it
runs the build there, and measures the experiment as it is at that commit
with run/commits.py's Measurer, so with the adaptive repetitions of local bisection.
Every run is labelled commit=SHA, bench=NAME and with the bench's labels; runs of the
commit already stored (by any bench) count. Two modes:

- runs (`at_least` > 0): at least that many runs of the commit (the range's ends);
- check (`at_least` 0): like good (0), like bad (1) or cannot tell (125) against the
  runs `good` and `bad` name, as `hoplab bisect check` answers git.

The answer goes to hoplab_fleet_bisect_results (the job's id, the commit, the bench and
a JSON document), which the driver (hoplab.fleet.bisect.driver) reads. One answer per
job, from the attempt that is the job's (the fencing token, as for a run job): a bench
that was silent (frozen, cut off) past the stale window and lives on finds its job
handed on; its runs taken since are saved superseded, never counted, and its answer is
not stored. A job whose answer is stored already (its bench died before marking it
done) is not measured again.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hoplab.errors import UsageError
from hoplab.fleet.queue import devices
from hoplab.fleet.queue.app import MEASURE_COMMIT
from hoplab.fleet.queue.db import Tables
from hoplab.fleet.queue.jobs import BenchRuns
from hoplab.nodes import workdir
from hoplab.run.bisect import step_record
from hoplab.run.commits import CannotTest, Measurer, Target, check, load_at
from hoplab.run.git import add_worktree, remove_worktree

if TYPE_CHECKING:
    from hoplab.fleet.queue.bundle import Query
    from hoplab.fleet.queue.worker import OtherJob, Runs
    from hoplab.spec.experiment import Experiment

# The task's name in procrastinate_jobs.task_name (queued with allow_unknown: a bench's
# own loop runs it, never procrastinate's worker).
TASK = MEASURE_COMMIT

# Made by the driver before it queues a job (a bench only writes to it).
RESULTS = Tables("hoplab bisect results", ("""
CREATE TABLE IF NOT EXISTS hoplab_fleet_bisect_results (
    job_id bigint PRIMARY KEY,
    bisection text NOT NULL,
    commit text NOT NULL,
    bench text NOT NULL,
    result jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
""",))

# The answer, stored only while the bench's attempt is the job's (the job's row locked
# until the answer is in, so it is not handed on half way); the first answer stays.
_STORE = ("INSERT INTO hoplab_fleet_bisect_results (job_id, bisection, commit, bench, result) "
          "SELECT %(job)s, %(bisection)s, %(commit)s, %(bench)s, %(result)s::jsonb WHERE "
          "EXISTS (SELECT 1 FROM procrastinate_jobs WHERE id = %(job)s AND status = 'doing' "
          "AND attempts = %(attempt)s FOR SHARE) ON CONFLICT (job_id) DO NOTHING "
          "RETURNING job_id")


@dataclass(frozen=True)
class CommitJob:
    bisection: str                  # the driver's id: its jobs, cancelled together
    commit: str
    repo: str                       # the repository's path, the same on every bench
    experiment: str                 # relative to the repository's top
    metric: str
    labels: dict[str, str]          # --label and --where: stored with the runs, select them
    build: str | None
    max_repeat: int
    at_least: int = 0               # > 0: take that many runs; 0: check against good, bad
    good: list[int] = field(default_factory=list)   # run ids of good's runs
    bad: list[int] = field(default_factory=list)
    job_id: int = 0
    build_timeout: float | None = None  # None: Target's default (hoplab.run.commits)
    attempt: int = 0                # the queue's attempt this bench took (fencing token)

    @classmethod
    def of(cls, job_id: int, args: Mapping[str, Any], attempt: int = 0) -> CommitJob:
        return cls(str(args["bisection"]), str(args["commit"]), str(args["repo"]),
                   str(args["experiment"]), str(args["metric"]), dict(args["labels"]),
                   None if args["build"] is None else str(args["build"]),
                   int(args["max_repeat"]), int(args["at_least"]),
                   [int(i) for i in args["good"]], [int(i) for i in args["bad"]], job_id,
                   # A job queued by a hoplab before --build-timeout has none.
                   None if args.get("build_timeout") is None
                   else float(args["build_timeout"]), attempt)

    def args(self) -> dict[str, Any]:
        """The job's arguments as queued."""
        doc = asdict(self)
        del doc["job_id"], doc["attempt"]
        return doc

    def target(self, sets: tuple[str, ...] = ()) -> Target:
        return Target(experiment=self.experiment, metric=self.metric, labels=self.labels,
                      build=self.build, max_repeat=self.max_repeat, sets=sets,
                      **({} if self.build_timeout is None
                         else {"build_timeout": self.build_timeout}))


def serve_job(job: OtherJob, runs: Runs, query: Query) -> None:
    """A bench's handler of TASK (hoplab.fleet.queue.worker's `tasks`)."""
    if not isinstance(runs, BenchRuns):
        raise RuntimeError("this bench's runs cannot measure commits")
    serve(CommitJob.of(job.job_id, job.args, job.attempt), runs, query)


def serve(job: CommitJob, runs: BenchRuns, query: Query) -> None:
    """Measure the job's commit on this bench and store the answer."""
    if query("SELECT 1 FROM hoplab_fleet_bisect_results WHERE job_id = %(job)s",
             job=job.job_id):
        return
    top, here = Path(job.repo), workdir.make()
    tree = here / "tree"
    try:
        add_worktree(top, tree, job.commit)
        result = measure(job, runs, tree)
    finally:
        # Also forgets the worktrees of killed benches (their directories went with
        # `hoplab clean`).
        remove_worktree(top, tree)
        shutil.rmtree(here, ignore_errors=True)
    if not query(_STORE, job=job.job_id, attempt=job.attempt, bisection=job.bisection,
                 commit=job.commit, bench=runs.bench, result=json.dumps(result)):
        _say(f"job {job.job_id} ({job.commit[:12]}) was handed to another bench while "
             f"this one was silent: its answer is that bench's, this one's is dropped")


def _say(text: str) -> None:
    print(f"hoplab: {text.strip()}", file=sys.stderr, flush=True)


def measure(job: CommitJob, runs: BenchRuns, tree: Path) -> dict[str, Any]:
    """The runs (mode runs) or the answer (mode check) of the commit checked out at
    `tree`; a commit that cannot be measured answers as `bisect check` does (125)."""
    target = job.target(tuple(runs.sets))
    measurer = Measurer(runs.sink.store, target, _say, checkout=lambda _sha: tree,
                        stamp={**runs.labels, "bench": runs.bench}, lab_name=runs.lab_name,
                        sink=runs.fenced(job))
    try:
        # A device serves one run at a time across benches (hoplab.fleet.queue.devices).
        keys = devices.device_keys(_load(tree, target, job.commit).variants[0].lab)
        with devices.holding(runs.db_url, keys, bench=runs.bench, job_id=job.job_id,
                             timeout_s=runs.lock_timeout_s):
            return _runs(measurer, job) if job.at_least else _check(measurer, job)
    except CannotTest as e:
        _say(f"cannot test {job.commit[:12]}: {e}")
        return {"commit": job.commit, "answer": 125, "word": "skipped", "reason": str(e),
                "runs": 0, "cannot": str(e)}


def _load(tree: Path, target: Target, sha: str) -> Experiment:
    try:
        return load_at(tree, target, sha)
    except UsageError as e:     # as Measurer.runs: this commit cannot be tested
        raise CannotTest(f"the experiment does not load at {sha[:12]}: {e}") from e


def _runs(measurer: Measurer, job: CommitJob) -> dict[str, Any]:
    got = measurer.runs(job.commit, job.at_least)
    return {"commit": job.commit, "runs": [r.id for r in got if r.id is not None],
            "new_runs": measurer.taken.get(job.commit, 0)}


def _check(measurer: Measurer, job: CommitJob) -> dict[str, Any]:
    store = measurer.store
    good = [store.get_run(i, series=False) for i in job.good]
    bad = [store.get_run(i, series=False) for i in job.bad]
    found, n = check(measurer, job.commit, good, bad)
    _say(f"{job.commit[:12]} is {found.word} ({found.reason}; {n} runs)")
    return step_record(job.commit, found, n, measurer.taken.get(job.commit, 0))
