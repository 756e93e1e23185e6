"""A schedule fired by a clock the test holds, on a real PostgreSQL store and the fleet's
real queue: each due time is submitted once (two benches ticking together included),
its runs judged once its jobs have finished, and the alert POSTed to a real HTTP
server when the goodput halved, not when nothing changed; a bench gone alerts once."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from hoplab.cli.main import main
from hoplab.fleet.schedule.firing import tick
from hoplab.fleet.schedule.tasks import QUEUE, TASK, app
from tests.helpers.schedule_runs import finish_jobs, store_firing
from tests.helpers.webhook import webhook

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXPERIMENT = """lab = "chain.toml"
repeat = 5

[[tests]]
name = "bulk"
kind = "tcp"
from = "client"
to = "server"
duration = "2s"
"""
BEFORE = [100e6, 101e6, 99e6, 100.5e6, 99.5e6]        # median 100 Mbit/s
HALVED = [50e6, 50.5e6, 49.5e6, 51e6, 49e6]           # median 50 Mbit/s
STILL = [50.2e6, 49.8e6, 50.1e6, 49.9e6, 50e6]        # median 50 Mbit/s
MINUTE = dt.timedelta(minutes=1)


def _experiment(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLES / "chain.toml", tmp_path / "chain.toml")
    path = tmp_path / "wan.toml"
    path.write_text(EXPERIMENT)
    return path


def _add(url: str, path: Path, alert: str, capsys: pytest.CaptureFixture[str],
         from_file: bool = False) -> dt.datetime:
    given = ["--alert", alert]
    if from_file:           # kept out of argv: read from a file
        (path.parent / "hook").write_text(alert + "\n")
        given = ["--alert-file", str(path.parent / "hook")]
    assert main(["schedule", "add", "nightly", str(path), "--db", url, "--cron", "0 2 * * *",
                 *given, "--dashboard-url", "http://lab.example:8080"]) == 0
    assert main(["schedule", "list", "--db", url, "--json"]) == 0
    out = capsys.readouterr().out
    (listed,) = json.loads(out[out.index("["):])
    parts = urlsplit(alert)
    assert listed["alert"] == f"{parts.scheme}://{parts.hostname}/…" and alert not in out
    return dt.datetime.fromisoformat(listed["next"])


def _jobs(url: str, experiment_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE "
                           "args->>'experiment_id' = %s", (experiment_id,)).fetchone()
    assert row is not None
    return int(row[0])


def _fire(url: str, at: dt.datetime, values: list[float]) -> str:
    """The firing due at `at`: submitted, its runs stored, its jobs finished."""
    (fired,) = tick(url, at).fired
    assert fired[0] == "nightly" and _jobs(url, fired[1]) == 5
    store_firing(url, fired[1], values, test="bulk", variant={},
                 started_at=at.timestamp() + 60)
    assert finish_jobs(url, fired[1]) == 5
    return fired[1]


def test_fired_once_judged_and_alerted_when_worse(db, tmp_path, capsys):
    with webhook() as hook:
        t1 = _add(db, _experiment(tmp_path), hook.url, capsys)
        assert (t1.hour, t1.minute) == (2, 0)
        # Two benches ticking at the due minute together: one submission.
        found: list[list[tuple[str, str]]] = []
        gate = threading.Barrier(2)

        def bench() -> None:
            gate.wait()
            found.append(tick(db, t1).fired)

        threads = [threading.Thread(target=bench) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(len(f) for f in found) == [0, 1]
        (first,) = next(f for f in found if f)
        assert tick(db, t1 + MINUTE).fired == []          # the same due time
        assert tick(db, t1 + 2 * MINUTE).judged == []      # its jobs still queued
        store_firing(db, first[1], BEFORE, test="bulk", variant={},
                     started_at=t1.timestamp() + 60)
        finish_jobs(db, first[1])
        done = tick(db, t1 + 3 * MINUTE)
        assert (done.judged, done.alerts, hook.received) == ([first], [], [])

        second = _fire(db, t1 + dt.timedelta(days=1), HALVED)
        done = tick(db, t1 + dt.timedelta(days=1, minutes=5))
        assert done.judged == [("nightly", second)] and len(done.alerts) == 1
        assert [(a.state, a.attempts) for a in done.sent] == [("sent", 1)]
        (got,) = hook.received
        (change,) = got["changes"]
        assert got["text"].splitlines()[0] == (
            f"nightly: goodput -50.0 % [{change['ci_pct'][0]:.1f}, "
            f"{change['ci_pct'][1]:.1f}] worse on wan / bulk")
        assert {k: change[k] for k in ("experiment", "test", "variant", "metric", "unit",
                                       "before", "after", "change_pct")} == {
            "experiment": "wan", "test": "bulk", "variant": {}, "metric": "goodput",
            "unit": "bit/s", "before": 100e6, "after": 50e6, "change_pct": -50.0}
        assert change["url"].startswith("http://lab.example:8080/compare?a=")

        # Nothing changed since: judged, and nothing sent.
        third = _fire(db, t1 + dt.timedelta(days=2), STILL)
        done = tick(db, t1 + dt.timedelta(days=2, minutes=5))
        assert (done.judged, done.alerts, len(hook.received)) == ([("nightly", third)], [], 1)
        assert main(["schedule", "alerts", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "sent, 1 attempt" in out and "nightly: goodput -50.0 %" in out
    assert hook.url not in out and "s3cr3t" not in out


def test_a_bench_gone_alerts_once(db, tmp_path, capsys):
    with webhook() as hook:
        t1 = _add(db, _experiment(tmp_path), hook.url, capsys, from_file=True)
        with psycopg.connect(db) as conn:
            conn.execute("INSERT INTO hoplab_fleet_benches (name, labels, machine, pid, "
                         "state, heartbeat) VALUES ('bench1', '{\"device\": \"erx\"}', "
                         "'lab2', 1, 'busy', %s)", (t1 - 10 * MINUTE,))
        assert tick(db, t1 - MINUTE).alerts == []          # 9 minutes: not yet
        assert len(tick(db, t1 + MINUTE).alerts) == 1      # 11 minutes
        assert tick(db, t1 + 2 * MINUTE).alerts == []
        assert main(["schedule", "list", "--db", db]) == 0
        assert main(["schedule", "remove", "weekly", "--db", db]) == 2
        assert main(["schedule", "remove", "nightly", "--db", db]) == 0
        assert main(["schedule", "list", "--db", db]) == 0
    out, err = capsys.readouterr()
    assert "alert http://127.0.0.1/…" in out and hook.url not in out + err
    assert "no schedule 'weekly' (there are: nightly)" in err
    assert out.splitlines()[-2:] == ["schedule nightly removed (its runs and alerts stay)",
                                     "no schedules"]
    (got,) = hook.received
    assert got["kind"] == "gone" and got["benches_gone"][0]["bench"] == "bench1"
    assert got["text"] == ("nightly: bench bench1 gone: no heartbeat for 11 min (last "
                           f"{t1 - 10 * MINUTE:%Y-%m-%d %H:%M} UTC)")


def test_the_tick_runs_as_a_procrastinate_task_at_its_minute(db, tmp_path, capsys):
    t1 = _add(db, _experiment(tmp_path), "https://hooks.example/services/x", capsys)
    ticker = app(db)
    with ticker.open():
        ticker.configure_task(TASK, queue=QUEUE).defer(timestamp=int(t1.timestamp()))
    ticker.run_worker(queues=[QUEUE], wait=False, install_signal_handlers=False)
    with psycopg.connect(db) as conn:
        rows = conn.execute("SELECT schedule, due, experiment_id FROM hoplab_fleet_firings"
                            ).fetchall()
    assert [(s, due) for s, due, _ in rows] == [("nightly", t1)]
    assert _jobs(db, rows[0][2]) == 5


def test_a_firing_that_cannot_be_submitted_alerts_once(db, tmp_path, capsys):
    with webhook() as hook:
        t1 = _add(db, _experiment(tmp_path), hook.url, capsys)
        with psycopg.connect(db) as conn:       # the packed files damaged in the store
            conn.execute("UPDATE hoplab_fleet_files SET content = 'x'")
        first = tick(db, t1)
        assert first.fired == [] and len(first.alerts) == 1
        assert [name for name, _ in first.errors] == ["nightly"]
        again = tick(db, t1 + MINUTE)          # tried again, told once
        assert (again.fired, again.alerts, len(again.errors)) == ([], [], 1)
    (got,) = hook.received
    assert got["kind"] == "failed" and got["text"].startswith(
        "nightly: could not submit wan: bundle ")
    assert got["text"].endswith("is missing or damaged")


def test_a_schedule_that_cannot_be_computed_is_skipped_and_reported(db, tmp_path, capsys):
    """A cron that never fires (saved before such a cron was refused, so written to the
    store here): every tick skips and reports it, telling the team once; the other
    schedule still fires; `schedule list` shows both and reports it (exit 1)."""
    with webhook() as hook:
        path = _experiment(tmp_path)
        t1 = _add(db, path, hook.url, capsys)
        assert main(["schedule", "add", "broken", str(path), "--db", db, "--cron",
                     "0 3 * * *", "--alert", hook.url]) == 0
        with psycopg.connect(db) as conn:
            conn.execute("UPDATE hoplab_fleet_schedules SET cron = '0 0 31 2 *' "
                         "WHERE name = 'broken'")
        first = tick(db, t1)
        assert [name for name, _ in first.fired] == ["nightly"]
        assert [name for name, _ in first.errors] == ["broken"]
        assert "never fires" in first.errors[0][1] and len(first.alerts) == 1
        again = tick(db, t1 + MINUTE)
        assert (again.fired, again.alerts, [n for n, _ in again.errors]) == \
            ([], [], ["broken"])
        capsys.readouterr()
        assert main(["schedule", "list", "--db", db]) == 1
        got = capsys.readouterr()
        assert [line.split()[0] for line in got.out.splitlines()] == ["broken", "nightly"]
        broken, nightly = got.out.splitlines()
        assert "next never" in broken and " 02:00 UTC  alert" in nightly
        assert "schedule broken:" in got.err and "never fires" in got.err
        assert main(["schedule", "list", "--db", db, "--json"]) == 1
        listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
        assert listed["broken"]["next"] is None and "never" in listed["broken"]["error"]
        assert listed["nightly"]["error"] is None
    (told,) = hook.received
    assert told["text"].startswith("broken: could not submit wan:")
