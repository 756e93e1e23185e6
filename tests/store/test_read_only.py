"""A store opened read-only (as `hoplab serve` opens one) is never written: not
created, not migrated, not switched to WAL; an old schema is refused with the command
that upgrades it."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import urllib.request
from pathlib import Path

import pytest
import sqlalchemy as sa

from hoplab.errors import HoplabError, UsageError
from hoplab.store import SCHEMA_VERSION, migrations, open_store
from hoplab.store.url import create_engine, parse_location
from tests.helpers.runs import make_run
from tests.helpers.web import HOPLAB, start_server, stop_server


def _v1_store(url: str) -> None:
    """A store as hoplab with schema 1 left it, one run in it."""
    engine = create_engine(parse_location(url))
    try:
        with engine.begin() as conn:
            migrations.create(conn, version=1)
    finally:
        engine.dispose()


def _version(url: str) -> int | None:
    engine = create_engine(parse_location(url), read_only=True)
    try:
        with engine.connect() as conn:
            return migrations.read_version(conn)
    finally:
        engine.dispose()


def _state(path: Path) -> tuple[str, int]:
    """The file's bytes (as a digest) and its mtime. (SQLite may leave an empty -wal and
    its -shm index beside a WAL store: how a reader shares it with a writer.)"""
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_old_schema_is_refused_and_left_as_it_was(store_url: str) -> None:
    _v1_store(store_url)
    with pytest.raises(UsageError) as info:
        open_store(store_url, read_only=True)
    message = str(info.value)
    assert "its schema is version 1, older than this hoplab's" in message
    assert "upgrade it once with `hoplab migrate --db " in message
    assert info.value.exit_code == 2
    assert _version(store_url) == 1
    with open_store(store_url) as store:          # the command the message names migrates
        assert store.migrated_from == 1
    assert _version(store_url) == SCHEMA_VERSION


def test_a_read_only_store_reads_and_cannot_write(store_url: str) -> None:
    with open_store(store_url) as store:
        run_id = store.save_run(make_run(goodput=1.0))
    with open_store(store_url, read_only=True) as store:
        assert [r.id for r in store.list_runs()] == [run_id]
        assert store.get_run(run_id).metric("goodput") == 1.0
        with pytest.raises(HoplabError, match="open read-only"):
            store.save_run(make_run())
        # Not only the Store refuses: the database itself is opened read-only.
        with store._engine.connect() as conn, pytest.raises(sa.exc.DBAPIError):
            conn.execute(sa.text("DELETE FROM runs"))


def test_an_empty_database_is_not_made_a_store(store_url: str) -> None:
    if "://" not in store_url:                   # SQLite: an empty file
        sqlite3.connect(store_url).close()
    with pytest.raises(UsageError, match="it holds no hoplab runs"):
        open_store(store_url, read_only=True)
    assert _version(store_url) is None


def test_serve_refuses_an_old_sqlite_store_without_touching_it(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    _v1_store(str(db))
    before = _state(db)
    done = subprocess.run([HOPLAB, "serve", "--db", str(db), "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "its schema is version 1" in done.stderr
    assert f"hoplab migrate --db {db}" in done.stderr
    assert _state(db) == before


def test_serve_leaves_a_current_store_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with open_store(str(db)) as store:
        store.save_run(make_run(goodput=1.0))
    # As another tool may leave it: serving must not switch it to WAL (a write).
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    before = _state(db)
    proc, line = start_server(db, "--port", "0")
    try:
        port = line.rsplit(":", 1)[1].split("/")[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs", timeout=10) as r:
            assert r.status == 200
    finally:
        stop_server(proc)
    assert _state(db) == before
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
