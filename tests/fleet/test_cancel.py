"""`hoplab fleet cancel` stops a run under way (stored cancelled, its lab down, the bench
serves on); `hoplab fleet` lists a bisection's failed jobs; a second stop signal while a
bench takes its lab down interrupts the teardown (exit 130, `hoplab clean` named)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from hoplab.fleet.bisect.jobs import TASK as MEASURE_COMMIT
from hoplab.fleet.bisect.jobs import CommitJob
from hoplab.fleet.queue.app import ANY_QUEUE, make_app
from hoplab.fleet.queue.schema import JOB_LABEL
from hoplab.store import open_store
from tests.fleet.benches import (
    bench,
    bench_state,
    fleet_said,
    lab_namespaces,
    measuring,
    query,
    stopped,
    until,
)
from tests.helpers.lab import hoplab, new_lab_name, pids_in

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _statuses(db: str) -> list[str]:
    return sorted(s for (s,) in query(db, "SELECT status::text FROM procrastinate_jobs"))


def test_fleet_cancel_stops_the_run_under_way(db: str, experiment: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # Runs of 30 s: the run is stopped, not waited for.
    experiment.write_text(experiment.read_text().replace('duration = "1s"', 'duration = "30s"'))
    got = hoplab("submit", str(experiment), "--db", db, "--json")
    assert got.returncode == 0, got.stderr
    experiment_id = json.loads(got.stdout)["experiment_id"]
    name = new_lab_name()
    try:
        with bench(db, name) as b:
            until("a run under way", lambda: measuring(name))
            (job_id,) = query(db, "SELECT id FROM procrastinate_jobs WHERE status = "
                                  "'doing'")[0]
            said = fleet_said(capsys, db, "cancel", experiment_id)
            assert "5 waiting jobs cancelled; a run under way is stopped" in said
            until("the run stopped and stored", lambda: query(
                db, "SELECT 1 FROM procrastinate_jobs WHERE status = 'aborted'"))
            until("the bench idle, its lab down", lambda: bench_state(db, name) == "idle"
                  and not lab_namespaces(name))
            assert b.poll() is None  # it serves on
            b.send_signal(signal.SIGTERM)
            said = stopped(b)
            assert b.returncode == 0, said
        with open_store(db, read_only=True) as store:
            (run,) = [store.get_run(r.id, series=False)
                      for r in store.list_runs({"experiment_id": experiment_id}, figures=False)]
        assert (run.status, run.labels[JOB_LABEL]) == ("cancelled", str(job_id))
        assert run.error == "cancelled by `hoplab fleet cancel`"
        assert run.duration_s < 30
        assert _statuses(db) == ["aborted"] + ["cancelled"] * 5
        status = json.loads(fleet_said(capsys, db, "--json"))
        (exp,) = status["experiments"]
        assert exp["finished"] and exp["cancelled"]
    finally:
        hoplab("clean", name)


def test_fleet_lists_a_bisections_failed_jobs(db: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A commit job a bench cannot run (its repository is not there): listed with the
    bench's error by `hoplab fleet`, as a run job's failure is."""
    job = CommitJob("b1s3c7", "0" * 40, str(tmp_path / "no-repo"), "exp.toml", "rtt_median",
                    {}, None, 5, at_least=5)
    fleet_said(capsys, db)  # the fleet's tables
    app = make_app(db)
    with app.open():
        (job_id,) = app.configure_task(MEASURE_COMMIT, queue=ANY_QUEUE).batch_defer(
            job.args())
    name = new_lab_name()
    with bench(db, name) as b:
        until("the job failed", lambda: _statuses(db) == ["failed"])
        b.send_signal(signal.SIGTERM)
        b.communicate(timeout=60)
    status = json.loads(fleet_said(capsys, db, "--json"))
    (failure,) = status["bisection_failures"]
    assert (failure["bisection"], failure["commit"], failure["job_id"], failure["bench"]) == \
        ("b1s3c7", "0" * 40, job_id, name)
    assert "no-repo" in failure["error"], failure
    said = fleet_said(capsys, db)
    assert f"failed: bisection b1s3c7 job {job_id} (commit 000000000000) on bench {name}: " \
        in said, said


def test_a_second_signal_interrupts_the_bench_taking_its_lab_down(
        db: str, experiment: Path) -> None:
    """A node's teardown command hangs (sleep 600, the first time): SIGTERM lets the run
    finish, the lab comes down and hangs in the teardown; a second SIGTERM interrupts
    it: exit 130, the run stored ok, and `hoplab clean` removes what is left."""
    experiment.write_text(experiment.read_text().replace("repeat = 3", "repeat = 1"))
    lab = experiment.parent / "lab.toml"
    once = experiment.parent / "hung-once"
    lab.write_text(lab.read_text().replace("[nodes.b]", (
        f'[nodes.b]\nteardown = [["sh", "-c", "test -e {once} || {{ touch {once}; '
        f'exec sleep 600; }}"]]')))
    got = hoplab("submit", str(experiment), "--db", db)
    assert got.returncode == 0, got.stderr
    name = new_lab_name()
    try:
        with bench(db, name) as b:
            until("a run under way", lambda: measuring(name))
            b.send_signal(signal.SIGTERM)
            until("the teardown hanging", lambda: any(
                _is_sleep(p) for p in pids_in(lab_namespaces(name))))
            b.send_signal(signal.SIGTERM)
            said = stopped(b)
        assert b.returncode == 130, said
        assert f"`hoplab clean {name}` removes what is left" in said
        assert f"bench {name} stopped (interrupted; its lab is left)" in said
        assert _statuses(db) == ["succeeded", "todo"]
        assert bench_state(db, name) == "stopped"
        got = hoplab("clean", name)
        assert got.returncode == 0, got.stderr
        assert not lab_namespaces(name)
    finally:
        hoplab("clean", name)


def _is_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"600"]
    except OSError:
        return False
