"""Commands that only read never create, upgrade or write a store; commands that write
upgrade an older one after keeping a copy of a SQLite file (NAME.db.bak-schemaN).

`hoplab runs --db typo.db` used to leave an empty 60 KB store behind and exit 0, and
every command upgraded an older store silently and without a copy.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa

from hoplab.cli.main import main
from hoplab.store import SCHEMA_VERSION, migrations, open_store
from hoplab.store.url import create_engine, parse_location
from tests.helpers.postgres import PgServer
from tests.store.test_migrations import _insert_v1_run

IPERF3 = Path(__file__).resolve().parents[1] / "data" / "iperf3" / "tcp_upload.json"

# Every command that only reads a store (serve: tests/store/test_read_only.py).
READERS = [["runs"], ["show", "1"], ["compare", "1", "2"], ["plot", "1", "--kind", "box"],
           ["report", "1", "-o", "{tmp}/r.html"], ["export", "1"], ["trend", "goodput"],
           ["profile", "1"], ["flamegraph", "1", "-o", "{tmp}/f.svg"]]


def _ids(argv: list[str]) -> str:
    return argv[0]


def _run(argv: list[str], url: str, tmp_path: Path) -> int:
    return main([a.format(tmp=tmp_path) for a in argv] + ["--db", url])


def _v1_store(url: str) -> None:
    engine = create_engine(parse_location(url))
    try:
        with engine.begin() as conn:
            migrations.create(conn, version=1)
            _insert_v1_run(conn)
    finally:
        engine.dispose()


def _version(url: str) -> int | None:
    engine = create_engine(parse_location(url), read_only=True)
    try:
        with engine.connect() as conn:
            return migrations.read_version(conn)
    finally:
        engine.dispose()


def _tables(url: str) -> list[str]:
    engine = create_engine(parse_location(url), read_only=True)
    try:
        return sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("argv", READERS, ids=_ids)
def test_a_reader_of_a_missing_sqlite_store_names_it_and_creates_nothing(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "typo.db"
    assert _run(argv, str(db), tmp_path) == 2
    assert f"no store at sqlite {db}" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", READERS, ids=_ids)
def test_a_reader_of_an_empty_postgresql_database_makes_no_store_of_it(
        argv: list[str], pg_server: PgServer, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    url = pg_server.fresh_database()
    assert _run(argv, url, tmp_path) == 2
    assert "holds no hoplab runs" in capsys.readouterr().err
    assert _tables(url) == []


@pytest.mark.parametrize("argv", READERS, ids=_ids)
def test_a_reader_refuses_an_older_store_with_the_command_that_upgrades_it(
        argv: list[str], store_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _v1_store(store_url)
    sqlite = "://" not in store_url
    before = _digest(Path(store_url)) if sqlite else None
    assert _run(argv, store_url, tmp_path) == 2
    err = capsys.readouterr().err
    assert "its schema is version 1" in err and f"`hoplab migrate --db {store_url}`" in err
    assert _version(store_url) == 1
    if sqlite:
        assert _digest(Path(store_url)) == before
        assert not Path(f"{store_url}.bak-schema1").exists()


def test_migrate_keeps_a_copy_of_a_sqlite_file_then_upgrades_it(
        store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _v1_store(store_url)
    sqlite = "://" not in store_url
    assert main(["migrate", "--db", store_url]) == 0
    out = capsys.readouterr().out
    assert f"from schema 1 to {SCHEMA_VERSION}" in out
    assert _version(store_url) == SCHEMA_VERSION
    copy = Path(f"{store_url}.bak-schema1")
    if sqlite:
        assert f"kept as {copy}" in out
        # The copy is the store as it was: schema 1, its run, readable on its own.
        assert _version(str(copy)) == 1
        with closing(sqlite3.connect(copy)) as conn:
            assert conn.execute("SELECT test, repetition FROM runs").fetchall() == [("bulk", 2)]
    else:
        assert "kept" not in out
    # Upgraded: the readers read it now.
    assert main(["runs", "--db", store_url, "--json"]) == 0
    assert '"test": "bulk"' in capsys.readouterr().out
    assert main(["migrate", "--db", store_url]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_migrate_of_a_missing_store_creates_nothing(
        store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--db", store_url]) == 2
    err = capsys.readouterr().err
    if "://" not in store_url:
        assert f"no store at sqlite {store_url}" in err
        assert list(tmp_path.iterdir()) == []
        # An empty file is not a store either, and is left empty (not switched to WAL).
        Path(store_url).touch()
        assert main(["migrate", "--db", store_url]) == 2
        assert "holds no hoplab runs" in capsys.readouterr().err
        assert Path(store_url).stat().st_size == 0
    else:
        assert "holds no hoplab runs" in err
        assert _tables(store_url) == []


def test_import_upgrades_an_older_store_after_keeping_a_copy(
        store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _v1_store(store_url)
    assert main(["import", str(IPERF3), "--db", store_url]) == 0
    err = capsys.readouterr().err
    assert f"upgraded store {parse_location(store_url)} from schema 1 to {SCHEMA_VERSION}" \
        in err
    assert _version(store_url) == SCHEMA_VERSION
    with open_store(store_url, read_only=True) as store:
        assert [r.test for r in store.list_runs()] == ["bulk", "tcp_upload"]
    if "://" not in store_url:
        copy = Path(f"{store_url}.bak-schema1")
        assert f"kept as {copy}" in err
        assert _version(str(copy)) == 1
        with closing(sqlite3.connect(copy)) as conn:
            assert conn.execute("SELECT test FROM runs").fetchall() == [("bulk",)]
