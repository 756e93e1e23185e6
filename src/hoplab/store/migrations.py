"""Versioned schema: create a new store, or bring an old one up to SCHEMA_VERSION.

Every upgrade runs in one transaction with the version check, under a lock
(SQLite: BEGIN IMMEDIATE, see store.py; PostgreSQL: an advisory lock), so two
processes opening the same old store at once migrate it once, and a failed
step leaves the store as it was. Under the same lock, before the first step, the
caller's `backup` keeps a copy of the store as it was (a SQLite file's copy).

Version history:
  1  runs, metrics, series, raw_outputs, schema_version
  2  runs.hoplab_version (filled from metadata["hoplab_version"]),
     index runs(experiment, test)
  3  run_labels(run_id, key, value): each label and variant value as text, indexed
     by (key, value), filled from the runs' labels and variant
  4  annotations(id, key, value, at, text, created_at): what `hoplab annotate` says
     happened, on a label value or at a time
  5  baselines(id, series, value, runs, selection, created_at): the value pinned by
     `hoplab baseline` that a series' latest runs are judged against
  6  kept_changes(series, last_run, runs, judge, changes, created_at): each series'
     judged changes, kept as runs are stored (the dashboard's home reads them)
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa

from hoplab.errors import UsageError
from hoplab.store.labels import label_rows
from hoplab.store.schema import SCHEMA_VERSION, TABLES, build

# Execution option asking for a writing transaction: on SQLite it makes BEGIN
# IMMEDIATE, which takes the write lock (waiting up to the busy timeout) before
# reading, so a read-then-write transaction cannot fail half way on a lock.
WRITE = "hoplab_write"

# Arbitrary, fixed: the key of the PostgreSQL advisory lock that serialises migrations.
_PG_LOCK_KEY = 0x686F706C6162


def read_version(conn: sa.Connection) -> int | None:
    """The store's schema version; None for a database without hoplab tables."""
    inspector = sa.inspect(conn)
    if not inspector.has_table("schema_version"):
        if inspector.has_table("runs"):
            raise UsageError("it has a runs table but no schema_version: not a hoplab store")
        return None
    table = build(1).schema_version
    version = conn.execute(sa.select(sa.func.max(table.c.version))).scalar()
    if version is None:
        raise UsageError("its schema_version table is empty: not a hoplab store")
    return int(version)


def _stamp(conn: sa.Connection, version: int) -> None:
    conn.execute(TABLES.schema_version.insert().values(version=version, applied_at=time.time()))


def create(conn: sa.Connection, version: int = SCHEMA_VERSION) -> None:
    """Create the tables of schema `version` in an empty database (tests create old ones)."""
    build(version).metadata.create_all(conn)
    _stamp(conn, version)


def _v1_to_v2(conn: sa.Connection) -> None:
    conn.execute(sa.text("ALTER TABLE runs ADD COLUMN hoplab_version VARCHAR"))
    for index in TABLES.runs.indexes:
        if index.name == "ix_runs_experiment_test":
            index.create(conn)
    v1_runs = build(1).runs
    rows = conn.execute(sa.select(v1_runs.c.id, v1_runs.c["metadata"])).all()
    updates = [{"run_id": run_id, "version": str(meta["hoplab_version"])}
               for run_id, meta in rows
               if isinstance(meta, dict) and meta.get("hoplab_version") is not None]
    if updates:
        runs = TABLES.runs
        conn.execute(
            runs.update().where(runs.c.id == sa.bindparam("run_id"))
            .values(hoplab_version=sa.bindparam("version")),
            updates,
        )


def _v2_to_v3(conn: sa.Connection) -> None:
    table = build(3).run_labels
    assert table is not None
    table.create(conn)    # with its index
    runs = build(2).runs
    rows = conn.execute(sa.select(runs.c.id, runs.c.labels, runs.c.variant)).all()
    batch: list[dict[str, object]] = []
    for run_id, labels, variant in rows:
        batch += label_rows(run_id, labels, variant)
        if len(batch) >= 10_000:
            conn.execute(table.insert(), batch)
            batch = []
    if batch:
        conn.execute(table.insert(), batch)


def _v3_to_v4(conn: sa.Connection) -> None:
    table = build(4).annotations
    assert table is not None
    table.create(conn)


def _v4_to_v5(conn: sa.Connection) -> None:
    table = build(5).baselines
    assert table is not None
    table.create(conn)


def _v5_to_v6(conn: sa.Connection) -> None:
    table = build(6).kept_changes
    assert table is not None
    table.create(conn)


# MIGRATIONS[n] takes a store from version n to n + 1.
MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3,
                                                          3: _v3_to_v4, 4: _v4_to_v5,
                                                          5: _v5_to_v6}


def _too_new(version: int) -> UsageError:
    return UsageError(f"it was created by a newer hoplab (schema {version}); "
                      f"this hoplab reads up to {SCHEMA_VERSION}")


def check(engine: sa.Engine, upgrade: str) -> int:
    """The schema version of the store behind `engine`, read without writing anything;
    UsageError unless it is this hoplab's. `upgrade`: the command that migrates it."""
    with engine.connect() as conn:
        version = read_version(conn)
        conn.rollback()
    if version is None:
        raise UsageError(NOT_A_STORE)
    if version > SCHEMA_VERSION:
        raise _too_new(version)
    if version < SCHEMA_VERSION:
        raise UsageError(f"its schema is version {version}, older than this hoplab's "
                         f"{SCHEMA_VERSION}, and it is opened read-only; upgrade it once "
                         f"with `{upgrade}` (which writes it), then try again")
    return version


# Keeps a copy of the store before an upgrade: called in the upgrading transaction,
# under its lock, with the schema version the copy holds.
Backup = Callable[[sa.Connection, int], None]

NOT_A_STORE = "it holds no hoplab runs (no hoplab tables)"


def no_backup(conn: sa.Connection, version: int) -> None:
    """For stores hoplab cannot copy (PostgreSQL: pg_dump is the administrator's)."""


def migrate(engine: sa.Engine, *, lock: Callable[[sa.Connection], None],
            backup: Backup = no_backup, create_new: bool = True) -> int:
    """Create or upgrade the store behind `engine`; return the schema version it had.

    `lock` runs first in the writing transaction (the backend's way to make it
    exclusive); `backup` keeps a copy of an older store before its first step. Without
    `create_new`, a database without hoplab's tables is refused rather than made a store.
    UsageError if the store is newer than this code or not a hoplab store.
    """
    with engine.connect() as conn:
        version = read_version(conn)
        conn.rollback()
    if version == SCHEMA_VERSION:
        return version
    if version is not None and version > SCHEMA_VERSION:
        raise _too_new(version)
    if version is None and not create_new:
        raise UsageError(NOT_A_STORE)
    with engine.connect() as conn:
        conn.execution_options(**{WRITE: True})
        with conn.begin():
            return _upgrade(conn, lock, backup)


def _upgrade(conn: sa.Connection, lock: Callable[[sa.Connection], None],
             backup: Backup) -> int:
    lock(conn)
    # Another process may have migrated while we waited for the lock.
    version = read_version(conn)
    if version is None:
        create(conn)
        return 0
    if version > SCHEMA_VERSION:
        raise _too_new(version)
    if version < SCHEMA_VERSION:
        backup(conn, version)
    start = version
    while version < SCHEMA_VERSION:
        MIGRATIONS[version](conn)
        version += 1
        _stamp(conn, version)
    return start


def no_lock(conn: sa.Connection) -> None:
    """For SQLite, where the WRITE option's BEGIN IMMEDIATE is the lock."""


def pg_lock(conn: sa.Connection) -> None:
    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_LOCK_KEY)))
