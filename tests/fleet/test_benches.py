"""Two benches on one machine run an experiment together through the queue; one is
SIGKILLed in the middle of a run: its job runs again on the other bench, every job ends
with exactly one ok run, and `hoplab clean` removes the dead bench's lab."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from hoplab.lab.where import netns_prefix
from hoplab.store import open_store
from tests.fleet.benches import (
    bench,
    bench_state,
    lab_namespaces,
    measuring,
    ok_runs,
    query,
    stopped,
    until,
)
from tests.helpers.lab import HOPLAB, hoplab, new_lab_name, pids_in

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_two_benches_one_killed(db: str, experiment: Path) -> None:
    a, b = new_lab_name(), new_lab_name()
    submit = None
    try:
        with bench(db, a) as bench_a, bench(db, b) as bench_b:
            until("both benches", lambda: bench_state(db, a) and bench_state(db, b))
            submit = subprocess.Popen([*HOPLAB, "submit", str(experiment), "--db", db,
                                       "--wait"], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # b has stored a run and is in the middle of the next one: its lab is up, a
            # tool runs in it.
            until("a run of bench b and another under way",
                  lambda: ok_runs(db, b) >= 1 and bench_state(db, b) == "busy"
                  and measuring(b))
            bench_b.send_signal(signal.SIGKILL)
            bench_b.wait(timeout=10)
            out, err = submit.communicate(timeout=90)
            assert submit.returncode == 0, out + err
            got = hoplab("fleet", "drain", a, "--db", db)
            assert got.returncode == 0, got.stderr
            said = stopped(bench_a)
            assert bench_a.returncode == 0, said
            assert f"bench {a} stopped" in said
        # "submitted exp: 6 runs, seed S, experiment id X"
        seed, experiment_id = out.split(", seed ")[1].split(", experiment id ")
        experiment_id = experiment_id.split()[0]
        with open_store(db, read_only=True) as store:
            runs = store.list_runs({"experiment_id": experiment_id}, figures=False)
            records = [store.get_run(r.id, series=False) for r in runs]
        # Each run with the submitted experiment's seed, its place in the seeded order.
        assert {r.seed for r in records} == {int(seed)}
        assert sorted(r.order or 0 for r in records if r.status == "ok") == list(range(6))
        ok = Counter(r.labels["fleet_job"] for r in runs if r.status == "ok")
        assert len(ok) == 6 and set(ok.values()) == {1}, ok
        assert {r.labels["bench"] for r in runs if r.status == "ok"} == {a, b}
        # The bench that stopped took its lab down; the killed one's is left, for clean.
        assert not lab_namespaces(a)
        left = lab_namespaces(b)
        assert left
        killed = glob.glob(f"{tempfile.gettempdir()}/hoplab-run-{bench_b.pid}-*")
        # Its run's working directory, and the one holding its experiment's files.
        assert any(glob.glob(f"{d}/*/exp.toml") for d in killed), killed
        got = hoplab("clean", b)
        assert got.returncode == 0, got.stdout + got.stderr
        assert not lab_namespaces(b)
        assert not pids_in(left)
        assert not [d for d in killed if os.path.exists(d)]
    finally:
        if submit is not None and submit.poll() is None:
            submit.kill()
            submit.communicate()
        hoplab("clean", a, b)


def test_sqlite_store_is_refused(tmp_path: Path, experiment: Path) -> None:
    db = str(tmp_path / "runs.db")
    for args in (["submit", str(experiment)], ["worker", "--bench", "x"], ["fleet"]):
        got = hoplab(*args, "--db", db)
        assert got.returncode == 2, got
        assert "PostgreSQL" in got.stderr and "docs/fleet.md" in got.stderr, got.stderr
        assert not os.path.exists(db)


def test_a_failed_run_fails_its_job_and_is_shown_with_its_error(db: str, experiment: Path
                                                                ) -> None:
    experiment.write_text(experiment.read_text().replace("repeat = 3", "repeat = 1").replace(
        '[matrix]\ninterval = ["0.1s", "0.2s"]',
        '[matrix.shaper.broken]\n"setup.a" = [["sh", "-c", "echo no tc here >&2; exit 3"]]'))
    name = new_lab_name()
    try:
        with bench(db, name) as b:
            got = hoplab("submit", str(experiment), "--db", db, "--wait", "--json")
            b.send_signal(signal.SIGTERM)
            b.communicate(timeout=60)
        assert got.returncode == 1, got.stderr
        (run,) = json.loads(got.stdout)["runs"]
        assert run["status"] == "failed" and "exited 3: no tc here" in run["error"]
        status = json.loads(hoplab("fleet", "--db", db, "--json").stdout)
        (failure,) = status["failures"]
        assert failure["run_id"] == run["id"] and failure["bench"] == name
        assert failure["error"] == run["error"]
        assert status["jobs"] == {"failed": 1}
    finally:
        hoplab("clean", name)


def test_a_job_a_bench_cannot_run_fails_with_why(db: str, experiment: Path) -> None:
    """A submitted file damaged in the store: the bench refuses to run its job, which
    fails with the reason, listed by `hoplab fleet`."""
    experiment.write_text(experiment.read_text().replace("repeat = 3", "repeat = 1"))
    got = hoplab("submit", str(experiment), "--db", db, "--json")
    assert got.returncode == 0, got.stderr
    experiment_id = json.loads(got.stdout)["experiment_id"]
    query(db, "UPDATE hoplab_fleet_files SET content = 'x' WHERE sha256 = (SELECT "
              "files->>'lab.toml' FROM hoplab_fleet_bundles) RETURNING sha256")
    name = new_lab_name()
    with bench(db, name) as b:
        until("its jobs failed", lambda: query(
            db, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'failed'")[0][0] == 2)
        b.send_signal(signal.SIGTERM)
        said = stopped(b)
    assert "lab.toml is missing or damaged" in said
    status = json.loads(hoplab("fleet", "--db", db, "--json").stdout)
    assert {(f["experiment_id"], f["bench"], f["run_id"]) for f in status["failures"]} == \
        {(experiment_id, name, None)}
    assert all("lab.toml is missing or damaged" in f["error"] for f in status["failures"])


def test_a_bench_of_two_workers_runs_two_jobs_at_once(db: str, experiment: Path,
                                                      tmp_path: Path) -> None:
    """--concurrency 2: two workers, each with its own lab, run two jobs at the same
    time, both labelled with the bench; SIGTERM stops both, and their labs are down. The
    bench file's facts apply to its labs (here the link's delay: 20 ms, not 1 ms)."""
    experiment.write_text(experiment.read_text().replace("repeat = 3", "repeat = 1"))
    facts = tmp_path / "bench.toml"
    facts.write_text('[lab.links.0]\ndelay = "20ms"\n')
    name = new_lab_name()
    try:
        with bench(db, name, "--concurrency", "2", "--bench-file", str(facts)) as b:
            until("two workers", lambda: bench_state(db, f"{name}#1")
                  and bench_state(db, f"{name}#2"))
            got = hoplab("submit", str(experiment), "--db", db, "--wait", "--json")
            assert got.returncode == 0, got.stderr
            b.send_signal(signal.SIGTERM)
            said = stopped(b)
            assert b.returncode == 0, said
        # 20 ms each way: an RTT of at least 40 ms (1 ms each way, as submitted: 2 ms).
        assert all(r["metrics"]["rtt_median"] >= 40.0 for r in json.loads(got.stdout)["runs"])
        with open_store(db, read_only=True) as store:
            runs = [store.get_run(r.id, series=False)
                    for r in store.list_runs({"bench": name}, figures=False)]
        assert len(runs) == 2 and {r.status for r in runs} == {"ok"}
        # At the same time, in two labs.
        (_, first_end), (second_start, _) = sorted((r.started_at, r.started_at + r.duration_s)
                                    for r in runs)
        assert second_start < first_end
        assert {r.metadata["lab"]["nodes"]["a"]["netns"].split(".")[0] for r in runs} == \
            {netns_prefix(f"{name}-1").rstrip("."), netns_prefix(f"{name}-2").rstrip(".")}
        assert not lab_namespaces(f"{name}-1") and not lab_namespaces(f"{name}-2")
        assert {b["state"] for b in json.loads(hoplab("fleet", "--db", db, "--json").stdout)
                ["benches"]} == {"stopped"}
    finally:
        hoplab("clean", f"{name}-1", f"{name}-2")
