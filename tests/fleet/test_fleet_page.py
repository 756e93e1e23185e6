"""The dashboard's fleet page (`hoplab serve` on the fleet's PostgreSQL store): the
benches with their labels and state, the jobs by state and each experiment's progress,
read in a session that writes nothing; and what `hoplab fleet` lists besides (a failed
bisection job, a job handed on, a superseded run, a wait for a device), from the same
fleet_status."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from hoplab.fleet.bisect.jobs import TASK as MEASURE_COMMIT
from hoplab.fleet.bisect.jobs import CommitJob
from hoplab.fleet.queue import devices
from hoplab.fleet.queue.app import ANY_QUEUE, make_app
from hoplab.fleet.queue.beat import Beat
from hoplab.fleet.queue.jobs import JobArgs, _Labelled
from hoplab.fleet.queue.routes import queue_of
from hoplab.fleet.queue.schema import JOB_LABEL
from hoplab.fleet.queue.submit import enqueue, pack
from hoplab.record import RunRecord
from hoplab.store import open_store
from tests.fleet.benches import bench, query, until
from tests.helpers.lab import new_lab_name
from tests.helpers.web import URL, start_server, stop_server


def _get(base: str, path: str) -> str:
    with urllib.request.urlopen(base + path, timeout=30) as resp:
        body: bytes = resp.read()
    return body.decode()


def _fleet_page(db: str) -> tuple[str, Any]:
    """/fleet and /api/fleet (parsed) from a dashboard serving `db`, stopped after."""
    proc, line = start_server(db, "--port", "0")
    match = URL.search(line)
    assert match, line
    base = f"http://127.0.0.1:{match.group(1)}"
    try:
        return _get(base, "/fleet"), json.loads(_get(base, "/api/fleet"))
    finally:
        stop_server(proc)


def test_the_fleet_page_shows_benches_jobs_and_progress(db: str, experiment: Path) -> None:
    open_store(db).close()  # the runs' store, as a bench's first run makes it
    experiment_id = enqueue(db, pack(db, experiment), where={"device": "erx"})
    beat = Beat(db, "erx-1", heartbeat_s=10, on_wake=lambda: None, on_drain=lambda: None)
    beat.start({"device": "erx"}, "lab1", os.getpid())
    try:
        tables = query(db, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        page, api = _fleet_page(db)
    finally:
        beat.stop()
    assert "erx-1" in page and "device=erx" in page and ">idle<" in page
    assert f'href="/runs?experiment_id={experiment_id}"' in page and "0 / 6" in page
    assert [b["name"] for b in api["benches"]] == ["erx-1"]
    assert api["jobs"] == {"todo": 6}
    (progress,) = api["experiments"]
    assert progress["id"] == experiment_id and progress["jobs"] == 6
    assert not progress["finished"]
    # Reading made nothing: the same tables as before the dashboard started.
    assert query(db, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == tables


def test_a_store_without_a_fleet_says_so(db: str) -> None:
    open_store(db).close()
    page, api = _fleet_page(db)
    assert "No fleet in this store" in page
    assert api is None
    assert query(db, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'hoplab_fleet%%'"
                 ) == [(0,)]


def _failed_commit_job(db: str, tmp_path: Path) -> int:
    """A commit job of a bisection, queued for any bench; its repository is missing."""
    job = CommitJob("b1sect", "ab" * 20, str(tmp_path / "no-repo"), "exp.toml",
                    "rtt_median", {}, None, 3)
    with make_app(db).open() as app:
        return int(app.configure_task(MEASURE_COMMIT, queue=ANY_QUEUE).defer(**job.args()))


def _silent_bench(db: str, name: str) -> tuple[Beat, int]:
    """Bench `name` takes a job of the device=erx queue and stops beating: its beat's
    loop stops, as a frozen bench's would (SIGSTOP)."""
    beat = Beat(db, name, heartbeat_s=0.2, on_wake=lambda: None, on_drain=lambda: None)
    beat.start({"device": "erx"}, "lab1", os.getpid())
    job = beat.fetch([queue_of((), {"device": "erx"})])
    assert job is not None and job.id is not None
    beat.execute("UPDATE hoplab_fleet_benches SET state = 'busy', current_job = %(job)s "
                 "WHERE name = %(name)s", job=job.id, name=name)
    beat._loop.call_soon_threadsafe(beat._loop.stop)
    beat._thread.join(30)
    assert not beat._thread.is_alive()
    return beat, job.id


def _thaw(beat: Beat) -> None:
    """The silent bench's loop runs again, where it stopped."""
    beat._thread = threading.Thread(target=beat._loop.run_forever, daemon=True)
    beat._thread.start()


def test_the_fleet_page_shows_handovers_superseded_runs_waits_and_failed_bisections(
        db: str, experiment: Path, tmp_path: Path) -> None:
    open_store(db).close()
    experiment_id = enqueue(db, pack(db, experiment), where={"device": "erx"})
    commit_job = _failed_commit_job(db, tmp_path)
    silent, worker = new_lab_name(), new_lab_name()
    frozen, job_id = _silent_bench(db, silent)
    try:
        # A real bench (no labels: only the commit job is its) fails the commit job and
        # hands the silent bench's job on.
        with bench(db, worker) as proc:
            until("the commit job failed", lambda: query(
                db, "SELECT 1 FROM procrastinate_jobs WHERE id = %s AND status = 'failed'",
                commit_job))
            until("the silent bench's job handed on", lambda: query(
                db, "SELECT 1 FROM hoplab_fleet_handovers WHERE job_id = %s", job_id))
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0, out
        # The silent bench lives on and stores its run: superseded.
        _thaw(frozen)
        with open_store(db) as store:
            sink = _Labelled(store, {"bench": silent, JOB_LABEL: str(job_id)},
                             JobArgs(job_id, experiment_id, "-", 1, 0, 0, 0, 1, attempt=0),
                             frozen.query)
            late = sink.save_run(RunRecord(experiment="exp", test="p", kind="ping",
                                           repetition=1, variant={}, labels={},
                                           started_at=time.time(),
                                           experiment_id=experiment_id))
        router = "ssh:192.0.2.1:22"

        def wait_for_router() -> None:
            with devices.holding(db, [router], bench="waiter", job_id=job_id, timeout_s=60):
                pass

        with devices.holding(db, [router], bench="holder", job_id=None):
            waiter = threading.Thread(target=wait_for_router)
            waiter.start()
            until("a wait for the router", lambda: query(
                db, "SELECT 1 FROM hoplab_fleet_device_waits"))
            page, api = _fleet_page(db)
        waiter.join(60)
    finally:
        if not frozen._thread.is_alive():
            _thaw(frozen)
        frozen.stop()
    assert [(f["job_id"], f["bisection"]) for f in api["bisection_failures"]] == \
        [(commit_job, "b1sect")]
    assert "<h2>failed bisection jobs</h2>" in page
    assert f"<td>{commit_job}</td><td><code>abababababab</code></td><td>{worker}</td>" \
        in page.replace(' class=""', "")
    assert "no-repo" in api["bisection_failures"][0]["error"]
    assert [(h["job_id"], h["bench"], h["by_bench"]) for h in api["handovers"]] == \
        [(job_id, silent, worker)]
    assert "<h2>jobs handed on</h2>" in page
    assert f"<td>{job_id}</td><td>hoplab:run</td><td>{silent}</td><td>{worker}</td>" \
        in page.replace(' class=""', "")
    assert [(r["run_id"], r["job_id"], r["bench"]) for r in api["superseded"]] == \
        [(late, job_id, silent)]
    assert "<h2>superseded runs</h2>" in page
    assert f'<td><a href="/run/{late}">{late}</a></td><td>{job_id}</td><td>{silent}</td>' \
        in page.replace(' class=""', "")
    assert [(w["device"], w["bench"], w["job_id"], w["held_by"])
            for w in api["device_waits"]] == [(router, "waiter", job_id, "holder")]
    assert "<h2>waiting for a device</h2>" in page
    assert f"<td>{router}</td><td>{job_id}</td><td>waiter</td>" in page.replace(' class=""', "")
    assert "<td>bench holder</td>" in page.replace(' class=""', "")
