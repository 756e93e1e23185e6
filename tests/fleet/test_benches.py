"""Two benches on one machine run an experiment together through the queue; one is
SIGKILLed in the middle of a run: its job runs again on the other bench, every job ends
with exactly one ok run, and `hoplab clean` removes the dead bench's lab."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from hoplab.lab.where import netns_prefix
from hoplab.store import open_store
from tests.helpers.lab import HOPLAB, hoplab, missing_requirement, namespaces, new_lab_name, pids_in

pytestmark = [pytest.mark.root, pytest.mark.slow]

T = TypeVar("T")


@pytest.fixture(autouse=True)
def _root() -> None:
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(reason)


def until(what: str, check: Callable[[], T | None], timeout: float = 60) -> T:
    """Poll `check` until it answers something; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextmanager
def bench(db: str, name: str, *extra: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([*HOPLAB, "worker", "--db", db, "--bench", name,
                             "--heartbeat", "1", *extra], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def _bench_row(db: str, name: str) -> dict[str, Any] | None:
    with psycopg.connect(db) as conn:
        try:
            row = conn.execute("SELECT state, current_job FROM hoplab_fleet_benches "
                               "WHERE name = %s", (name,)).fetchone()
        except psycopg.errors.UndefinedTable:  # no bench has made the fleet's tables yet
            return None
    return None if row is None else {"state": row[0], "job": row[1]}


def _ok_runs(db: str, name: str) -> int:
    with open_store(db, read_only=True) as store:
        return len(store.list_runs({"bench": name, "status": "ok"}, figures=False))


def test_two_benches_one_killed(db: str, experiment: Path) -> None:
    a, b = new_lab_name(), new_lab_name()
    submit = None
    try:
        with bench(db, a) as bench_a, bench(db, b) as bench_b:
            until("both benches", lambda: _bench_row(db, a) and _bench_row(db, b))
            submit = subprocess.Popen([*HOPLAB, "submit", str(experiment), "--db", db,
                                       "--wait"], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # b has stored a run and is in the middle of the next one: its lab is up, a
            # tool runs in it.
            until("a run of bench b and another under way",
                  lambda: _ok_runs(db, b) >= 1 and (_bench_row(db, b) or {}).get("state")
                  == "busy" and pids_in({n for n in namespaces()
                                         if n.startswith(netns_prefix(b))}))
            bench_b.send_signal(signal.SIGKILL)
            bench_b.wait(timeout=10)
            out, err = submit.communicate(timeout=90)
            assert submit.returncode == 0, out + err
            bench_a.send_signal(signal.SIGTERM)
            said, _ = bench_a.communicate(timeout=60)
            assert bench_a.returncode == 0, said
        with open_store(db, read_only=True) as store:
            runs = store.list_runs({"experiment_id": out.split("experiment id ")[1].split()[0]
                                    .rstrip(")")}, figures=False)
        ok = Counter(r.labels["fleet_job"] for r in runs if r.status == "ok")
        assert len(ok) == 6 and set(ok.values()) == {1}, ok
        assert {r.labels["bench"] for r in runs if r.status == "ok"} == {a, b}
        # The bench that stopped took its lab down; the killed one's is left, for clean.
        assert not [n for n in namespaces() if n.startswith(netns_prefix(a))]
        left = {n for n in namespaces() if n.startswith(netns_prefix(b))}
        assert left
        got = hoplab("clean", b)
        assert got.returncode == 0, got.stdout + got.stderr
        assert not {n for n in namespaces() if n.startswith(netns_prefix(b))}
        assert not pids_in(left)
    finally:
        if submit is not None and submit.poll() is None:
            submit.kill()
            submit.communicate()
        hoplab("clean", a, b)


def test_sqlite_store_is_refused(tmp_path: Path, experiment: Path) -> None:
    db = str(tmp_path / "runs.db")
    for args in (["submit", str(experiment)], ["worker", "--bench", "x"], ["fleet"],
                 ["fleet", "drain", "x"]):
        got = hoplab(*args, "--db", db)
        assert got.returncode == 2, got
        assert "PostgreSQL" in got.stderr and "docs/fleet.md" in got.stderr, got.stderr
        assert not os.path.exists(db)
