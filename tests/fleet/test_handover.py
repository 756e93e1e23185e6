"""Benches that die or freeze: every kind of job comes back to the queue once its bench
stops beating (a bisection's commit job too), and a bench frozen past the stale window
(SIGSTOP) that lives on stores its run as superseded, never as a second ok run."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from hoplab.errors import HoplabError
from hoplab.fleet.bisect.jobs import RESULTS, CommitJob
from hoplab.fleet.bisect.jobs import TASK as MEASURE_COMMIT
from hoplab.fleet.queue import schema
from hoplab.fleet.queue.app import ANY_QUEUE, make_app
from hoplab.fleet.queue.db import connect
from hoplab.fleet.queue.schema import JOB_LABEL, ONE_OK_RUN_INDEX
from hoplab.record import RunRecord
from hoplab.store import open_store
from tests.fleet.benches import all_idle, bench, bench_state, fleet_said, measuring, query, until
from tests.fleet.test_bisect_fleet import EXPERIMENT as BISECT_EXPERIMENT
from tests.fleet.test_bisect_fleet import LAB as BISECT_LAB
from tests.helpers.git_history import history
from tests.helpers.lab import HOPLAB, hoplab, new_lab_name

pytestmark = [pytest.mark.root, pytest.mark.slow]

COMMITS, STEP = 17, 12


def _runs_of(db: str, commit: str, bench_name: str) -> int:
    with open_store(db, read_only=True) as store:
        return len(store.list_runs({"commit": commit, "bench": bench_name}, figures=False))


def _commit_under_way(db: str, names: list[str], ends: tuple[str, str]
                      ) -> tuple[str, int, str] | None:
    """A bench in the middle of a commit of the search (not an end of the range): its
    job under way, one of its runs of the commit stored, the next one measuring."""
    for job_id, commit, name in query(
            db, "SELECT j.id, j.args->>'commit', b.name FROM procrastinate_jobs j JOIN "
                "hoplab_fleet_benches b ON b.current_job = j.id WHERE j.status = 'doing' "
                "AND j.task_name = %s", MEASURE_COMMIT):
        if name in names and commit not in ends and _runs_of(db, commit, name) >= 1 \
                and measuring(name):
            return str(name), int(job_id), str(commit)
    return None


def _dump(db: str) -> list[tuple[Any, ...]]:
    """Every run: id, commit, bench, status, rtt_median (said when the driver fails)."""
    with open_store(db, read_only=True) as store:
        return [(r.id, r.labels.get("commit", "")[:7], r.labels.get("bench"), r.status,
                 [m.value for m in store.get_run(r.id or 0, series=False).metrics
                  if m.name == "rtt_median"]) for r in store.list_runs({}, figures=False)]


def test_a_bench_killed_in_the_middle_of_a_commit_hands_its_job_on(
        db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    shas = history(repo, COMMITS, lambda i: {
        "exp.toml": BISECT_EXPERIMENT,
        "lab.toml": BISECT_LAB.format(delay="10ms" if i >= STEP else "5ms")})
    names = [new_lab_name() for _ in range(3)]
    driver = None
    try:
        with ExitStack() as stack:
            procs = {n: stack.enter_context(bench(db, n, "--label", "site=h")) for n in names}
            all_idle(db, names, list(procs.values()))
            driver = subprocess.Popen(
                [*HOPLAB, "bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                 "--bad", "main", "--db", db, "--fleet", "--where", "site=h",
                 # Room to top up: 5 vs 5 runs with ties can miss p < 0.01.
                 "--metric", "rtt_median", "--max-repeat", "10"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            ends = (shas[0], shas[-1])
            killed, job_id, commit = until("a bench in the middle of a commit",
                                           lambda: _commit_under_way(db, names, ends),
                                           timeout=120)
            procs[killed].send_signal(signal.SIGKILL)
            procs[killed].wait(timeout=10)
            # Before the fix the driver waited for ever: a bound, not a wait for readiness.
            out, err = driver.communicate(timeout=300)
            for name, p in procs.items():
                if name != killed:
                    p.send_signal(signal.SIGTERM)
            codes = [p.wait(timeout=60) for n, p in procs.items() if n != killed]
        assert driver.returncode == 0, f"{out}{err}{_dump(db)} killed {killed} in {commit}"
        assert codes == [0, 0]
        first = re.search(r"^first bad commit: \w+ change (\d+) \((\w+)\)", out, re.M)
        assert first and first.group(2) == shas[STEP - 1], out
        # The job was handed on: its commit was measured by another bench, which counted
        # the killed bench's runs of it.
        (done,) = query(db, "SELECT status::text, attempts FROM procrastinate_jobs "
                            "WHERE id = %s", job_id)
        assert done == ("succeeded", 2)
        (bench_of,) = query(db, "SELECT bench FROM hoplab_fleet_bisect_results "
                                "WHERE job_id = %s", job_id)
        assert bench_of[0] in set(names) - {killed}
        status = json.loads(fleet_said(capsys, db, "--json"))
        handed = [h for h in status["handovers"] if h["job_id"] == job_id]
        assert [(h["task"], h["bench"], h["attempt"]) for h in handed] == \
            [(MEASURE_COMMIT, killed, 0)]
        assert handed[0]["by_bench"] in set(names) - {killed}
        said = fleet_said(capsys, db)
        assert f"handed on: job {job_id} ({MEASURE_COMMIT}) from bench {killed}" in said
        assert {b["name"]: b["state"] for b in status["benches"]}[killed] == "gone"
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.communicate()
        hoplab("clean", *names)


def test_a_frozen_bench_that_thaws_stores_its_late_run_as_superseded(
        db: str, experiment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bench a takes a job and is frozen (SIGSTOP) in the middle of its run for longer
    than the stale window (3 heartbeats of 1 s); bench b is handed the job and stores its
    ok run; a thaws and finishes: its run is stored superseded, the job keeps one ok run,
    and `hoplab fleet` says so."""
    experiment.write_text(experiment.read_text().replace("repeat = 3", "repeat = 1"))
    got = hoplab("submit", str(experiment), "--db", db, "--json")
    assert got.returncode == 0, got.stderr
    experiment_id = json.loads(got.stdout)["experiment_id"]
    a, b = new_lab_name(), new_lab_name()
    try:
        with bench(db, a) as bench_a:
            until("a run under way on a", lambda: bench_state(db, a) == "busy"
                  and measuring(a))
            (job_a,) = query(db, "SELECT current_job FROM hoplab_fleet_benches "
                                 "WHERE name = %s", a)[0]
            bench_a.send_signal(signal.SIGSTOP)
            try:
                with bench(db, b) as bench_b:
                    until("b's ok run of a's job", lambda: query(
                        db, "SELECT 1 FROM hoplab_fleet_handovers WHERE job_id = %s",
                        job_a) and _ok_runs_of_job(db, job_a, b), timeout=90)
                    bench_a.send_signal(signal.SIGCONT)
                    until("a's late run stored", lambda: _runs_of_job(db, job_a, a),
                          timeout=90)
                    until("every job done", lambda: {s for (s,) in query(
                        db, "SELECT status::text FROM procrastinate_jobs")} == {"succeeded"})
                    for p in (bench_a, bench_b):
                        p.send_signal(signal.SIGTERM)
                    for p in (bench_a, bench_b):
                        p.communicate(timeout=60)
                        assert p.returncode == 0
            finally:
                bench_a.send_signal(signal.SIGCONT)
        with open_store(db, read_only=True) as store:
            runs = store.list_runs({"experiment_id": experiment_id}, figures=False)
            late = [store.get_run(r.id, series=False) for r in runs
                    if r.labels["bench"] == a and r.labels[JOB_LABEL] == str(job_a)]
        ok = Counter(r.labels[JOB_LABEL] for r in runs if r.status == "ok")
        assert len(ok) == 2 and set(ok.values()) == {1}, ok
        assert [r.status for r in late] == ["superseded"]
        assert f"job {job_a} was handed to another bench" in (late[0].error or "")
        status = json.loads(fleet_said(capsys, db, "--json"))
        assert [(s["run_id"], s["job_id"], s["bench"]) for s in status["superseded"]] == \
            [(late[0].id, job_a, a)]
        said = fleet_said(capsys, db)
        assert f"superseded: run {late[0].id} of job {job_a} stored by bench {a}" in said
        # Where runs are stored, a second ok run of the job is refused, whoever saves it.
        with open_store(db) as store, pytest.raises(HoplabError, match=ONE_OK_RUN_INDEX):
            store.save_run(RunRecord(experiment="exp", test="p", kind="ping", repetition=1,
                                     variant={}, labels={JOB_LABEL: str(job_a)},
                                     started_at=1.7e9, experiment_id=experiment_id))
    finally:
        hoplab("clean", a, b)


def _runs_of_job(db: str, job_id: int, bench_name: str, status: str | None = None) -> int:
    filters = {JOB_LABEL: str(job_id), "bench": bench_name}
    if status is not None:
        filters["status"] = status
    with open_store(db, read_only=True) as store:
        return len(store.list_runs(filters, figures=False))


def _ok_runs_of_job(db: str, job_id: int, bench_name: str) -> int:
    return _runs_of_job(db, job_id, bench_name, "ok")



def _queue_commit_job(db: str, repo: Path, commit: str, at_least: int) -> int:
    """A commit job of a bisection (mode runs: `at_least` runs of the commit), queued for
    any bench, as `bisect run --fleet` queues the ends of its range."""
    connect(db, tables=[schema.QUEUE, RESULTS]).close()    # as the driver makes them
    job = CommitJob("fr0zen", commit, str(repo), "exp.toml", "rtt_median", {}, None, 10,
                    at_least=at_least)
    with make_app(db).open() as app:
        return int(app.configure_task(MEASURE_COMMIT, queue=ANY_QUEUE).defer(**job.args()))


def _commit_runs(db: str, commit: str) -> list[tuple[int, str, str]]:
    """Each run of the commit: its id, bench and status."""
    with open_store(db, read_only=True) as store:
        return [(r.id or 0, r.labels["bench"], r.status)
                for r in store.list_runs({"commit": commit}, figures=False)]


def test_a_frozen_bench_that_thaws_in_the_middle_of_a_commit_stores_one_result(
        db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bench a measures a commit (3 runs) and is frozen (SIGSTOP) after its first run,
    for longer than the stale window; bench b is handed the job, counts a's first run,
    takes the other two and stores the job's result. a thaws and finishes: its late runs
    are superseded, its result is not stored: one result for the commit, whose runs are
    the commit's ok runs."""
    repo = tmp_path / "repo"
    (sha,) = history(repo, 1, lambda _i: {"exp.toml": BISECT_EXPERIMENT,
                                          "lab.toml": BISECT_LAB.format(delay="5ms")})
    job_id = _queue_commit_job(db, repo, sha, 3)
    a, b = new_lab_name(), new_lab_name()
    try:
        with bench(db, a) as bench_a:
            until("a in the middle of the commit", lambda: bench_state(db, a) == "busy"
                  and _runs_of(db, sha, a) >= 1 and measuring(a))
            bench_a.send_signal(signal.SIGSTOP)
            try:
                with bench(db, b) as bench_b:
                    until("b's result of the commit", lambda: query(
                        db, "SELECT 1 FROM hoplab_fleet_bisect_results WHERE bench = %s", b),
                        timeout=90)
                    bench_a.send_signal(signal.SIGCONT)
                    until("a done with the commit", lambda: bench_state(db, a) == "idle",
                          timeout=90)
                    for p in (bench_a, bench_b):
                        p.send_signal(signal.SIGTERM)
                    for p in (bench_a, bench_b):
                        out, _ = p.communicate(timeout=60)
                        assert p.returncode == 0, out
            finally:
                bench_a.send_signal(signal.SIGCONT)
        runs = _commit_runs(db, sha)
        (result,) = query(db, "SELECT bench, result FROM hoplab_fleet_bisect_results "
                              "WHERE commit = %s", sha)
        assert result[0] == b, runs
        ok = sorted(i for i, _, s in runs if s == "ok")
        assert sorted(result[1]["runs"]) == ok and len(ok) == 3, runs
        late = [i for i, on, s in runs if on == a and s != "ok"]
        assert late and {s for i, _, s in runs if i in late} == {"superseded"}, runs
        assert query(db, "SELECT status::text, attempts FROM procrastinate_jobs WHERE id = "
                         "%s", job_id) == [("succeeded", 2)]
        status = json.loads(fleet_said(capsys, db, "--json"))
        assert sorted((s["run_id"], s["job_id"], s["bench"]) for s in status["superseded"]) \
            == [(i, job_id, a) for i in sorted(late)]
    finally:
        hoplab("clean", a, b)
