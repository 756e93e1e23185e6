"""The dashboard's fleet page (`hoplab serve` on the fleet's PostgreSQL store): the
benches with their labels and state, the jobs by state and each experiment's progress,
read in a session that writes nothing."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from hoplab.fleet.queue.beat import Beat
from hoplab.fleet.queue.submit import enqueue, pack
from hoplab.store import open_store
from tests.fleet.benches import query
from tests.helpers.web import URL, start_server, stop_server


def _get(base: str, path: str) -> str:
    with urllib.request.urlopen(base + path, timeout=30) as resp:
        body: bytes = resp.read()
    return body.decode()


def test_the_fleet_page_shows_benches_jobs_and_progress(db: str, experiment: Path) -> None:
    open_store(db).close()  # the runs' store, as a bench's first run makes it
    experiment_id = enqueue(db, pack(db, experiment), where={"device": "erx"})
    beat = Beat(db, "erx-1", heartbeat_s=10, on_wake=lambda: None, on_drain=lambda: None)
    beat.start({"device": "erx"}, "lab1", os.getpid())
    try:
        tables = query(db, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        proc, line = start_server(db, "--port", "0")
        match = URL.search(line)
        assert match, line
        base = f"http://127.0.0.1:{match.group(1)}"
        try:
            page = _get(base, "/fleet")
            api = json.loads(_get(base, "/api/fleet"))
        finally:
            stop_server(proc)
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
    proc, line = start_server(db, "--port", "0")
    match = URL.search(line)
    assert match, line
    base = f"http://127.0.0.1:{match.group(1)}"
    try:
        page = _get(base, "/fleet")
        api = _get(base, "/api/fleet")
    finally:
        stop_server(proc)
    assert "No fleet in this store" in page
    assert json.loads(api) is None
    assert query(db, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'hoplab_fleet%%'"
                 ) == [(0,)]
