"""Baselines in the store (schema 5), on SQLite and PostgreSQL: pinned, replaced per
series, listed and removed; a store of schema 4 gains the table after a copy is kept."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa

from hoplab.errors import UsageError
from hoplab.store import SCHEMA_VERSION, Kept, Store, migrations, open_store
from hoplab.store.url import create_engine, parse_location


def test_baselines_are_pinned_replaced_listed_and_removed(store: Store) -> None:
    (first,) = store.pin_baselines([("s1", '"v40"', [3, 1, 2])], "version=v40")
    second, third = store.pin_baselines([("s2", '"v2"', [9]), ("s1", '"v41"', [4])],
                                        "version=v41")
    found = store.baselines()
    # Pinning s1 again replaced its baseline: one per series.
    assert [(b.id, b.series, b.value, b.runs, b.selection) for b in found] == [
        (second, "s2", '"v2"', (9,), "version=v41"),
        (third, "s1", '"v41"', (4,), "version=v41")]
    assert first not in {b.id for b in found}
    assert store.remove_baseline(second).series == "s2"
    assert [b.id for b in store.baselines()] == [third]
    with pytest.raises(UsageError, match=f"no baseline {second} in .*baseline --list"):
        store.remove_baseline(second)


def test_judged_changes_are_kept_and_replaced(store: Store) -> None:
    assert store.kept_changes() == {}
    first = Kept(last_run=2**33, runs=3, judge="[1]", changes="null")
    store.keep_changes({"s1": first, "s2": Kept(5, 1, "[1]", "[]")})
    store.keep_changes({"s1": Kept(7, 4, "[2]", '[{"metric": "goodput"}]')})
    assert store.kept_changes() == {"s1": Kept(7, 4, "[2]", '[{"metric": "goodput"}]'),
                                    "s2": Kept(5, 1, "[1]", "[]")}
    store.keep_changes({"s3": first})             # a run id past 32 bits is kept whole
    assert store.kept_changes()["s3"] == first


def test_a_schema_4_store_gains_baselines_after_a_copy_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    engine = create_engine(parse_location(str(path)), read_only=False)
    with engine.begin() as conn:
        migrations.create(conn, version=4)
        conn.execute(sa.text("INSERT INTO annotations (key, value, at, text, created_at) "
                             "VALUES ('version', 'v45', NULL, 'kernel bump', 1.0)"))
    engine.dispose()
    with open_store(str(path)) as store:
        assert (store.migrated_from, SCHEMA_VERSION) == (4, 6)
        assert store.backup == Path(f"{path}.bak-schema4")
        assert store.baselines() == []
        assert [a.text for a in store.annotations()] == ["kernel bump"]
    # The copy is the store as it was: schema 4, its annotation, no baselines table.
    with closing(sqlite3.connect(f"{path}.bak-schema4")) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (4,)
        assert conn.execute("SELECT text FROM annotations").fetchall() == [("kernel bump",)]
        assert not conn.execute("SELECT name FROM sqlite_master WHERE name = 'baselines'"
                                ).fetchall()
