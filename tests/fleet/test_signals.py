"""A bench's signals: SIGTERM lets the run under way finish and stop the bench (exit 0);
a second signal interrupts the run, stored as interrupted, its job back in the queue
(exit 130); `fleet cancel` drops an experiment's waiting jobs; a run already stored ok
is not run again when its job comes back (the bench that stored it died before marking
the job done)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from hoplab.fleet.queue.schema import JOB_LABEL
from hoplab.store import open_store
from tests.fleet.benches import (
    bench,
    bench_state,
    fleet_said,
    measuring,
    ok_runs,
    query,
    stopped,
    until,
)
from tests.helpers.lab import hoplab, new_lab_name

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _submit(db: str, experiment: Path) -> str:
    got = hoplab("submit", str(experiment), "--db", db)
    assert got.returncode == 0, got.stderr
    return got.stdout.strip()


def _jobs(db: str, experiment_id: str) -> dict[int, str]:
    return {int(i): str(s) for i, s in query(
        db, "SELECT id, status::text FROM procrastinate_jobs "
            "WHERE args->>'experiment_id' = %s", experiment_id)}


def test_sigterm_finishes_the_run_a_second_one_interrupts_it(
        db: str, experiment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The second signal is sent once the bench says it noted the first (`draining`; it
    was `busy` before either), so it cannot land first; a 4 s ping leaves seconds for it
    to land while the run is still under way, on a busy machine too."""
    name = new_lab_name()
    experiment.write_text(experiment.read_text().replace('duration = "1s"',
                                                         'duration = "4s"'))
    experiment_id = _submit(db, experiment)
    try:
        with bench(db, name) as b:
            until("a run under way", lambda: measuring(name))
            b.send_signal(signal.SIGTERM)
            out = stopped(b)
            assert b.returncode == 0, out
        assert ok_runs(db, name) == 1
        assert sorted(_jobs(db, experiment_id).values()) == ["succeeded"] + ["todo"] * 5
        assert bench_state(db, name) == "stopped"

        with bench(db, name) as b:
            until("a run under way", lambda: ok_runs(db, name) == 1 and measuring(name))
            b.send_signal(signal.SIGTERM)
            until("the bench draining", lambda: bench_state(db, name) == "draining")
            b.send_signal(signal.SIGTERM)
            out = stopped(b)
            assert b.returncode == 130, out
        with open_store(db, read_only=True) as store:
            (interrupted,) = store.list_runs({"status": "interrupted"}, figures=False)
            assert interrupted.labels["bench"] == name
            assert store.get_run(interrupted.id).error == "interrupted by SIGTERM"
        # Its job is back in the queue, the others still wait.
        assert _jobs(db, experiment_id)[int(interrupted.labels[JOB_LABEL])] == "todo"
        assert sorted(_jobs(db, experiment_id).values()) == ["succeeded"] + ["todo"] * 5

        said = fleet_said(capsys, db, "cancel", experiment_id)
        assert "5 waiting jobs cancelled" in said, said
        status = json.loads(fleet_said(capsys, db, "--json"))
        (exp,) = status["experiments"]
        assert exp["cancelled"] and exp["states"] == {"succeeded": 1, "cancelled": 5}
        assert exp["finished"]
        assert [(b["name"], b["state"]) for b in status["benches"]] == [(name, "stopped")]
    finally:
        hoplab("clean", name)


def test_a_job_whose_ok_run_is_stored_is_not_run_again(db: str, experiment: Path) -> None:
    """The bench died after storing the run and before marking its job done: the job
    comes back, and the next bench finds the run and only marks the job done."""
    from hoplab.record import RunRecord

    name = new_lab_name()
    experiment.write_text(experiment.read_text().replace("repeat = 3", "repeat = 1"))
    experiment_id = _submit(db, experiment)
    first = min(_jobs(db, experiment_id))
    with open_store(db) as store:
        stored = store.save_run(RunRecord(
            experiment="exp", test="p", kind="ping", repetition=1, variant={},
            labels={"bench": "gone", JOB_LABEL: str(first)}, started_at=1.7e9,
            experiment_id=experiment_id))
    try:
        with bench(db, name) as b:
            until("every job done", lambda: set(_jobs(db, experiment_id).values())
                  == {"succeeded"})
            b.send_signal(signal.SIGTERM)
            b.communicate(timeout=60)
        with open_store(db, read_only=True) as store:
            runs = store.list_runs({"experiment_id": experiment_id}, figures=False)
        assert [r.id for r in runs if r.labels[JOB_LABEL] == str(first)] == [stored]
        assert len(runs) == 2 and {r.status for r in runs} == {"ok"}
    finally:
        hoplab("clean", name)
