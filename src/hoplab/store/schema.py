"""The store's tables: one SQLAlchemy Core definition for SQLite and PostgreSQL.

`build(version)` gives the tables as they were at any schema version, so that
migrations and their tests can create an old database with the old DDL
instead of keeping hand-written SQL for each backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

# Raise with a new step in migrations.MIGRATIONS whenever the tables change.
SCHEMA_VERSION = 6

# Columns of `runs` that list_runs filters on in SQL; other keys are labels or variants.
FILTER_COLUMNS = ("id", "experiment", "experiment_id", "test", "kind", "status")


@dataclass(frozen=True)
class Tables:
    metadata: sa.MetaData
    runs: sa.Table
    metrics: sa.Table
    series: sa.Table
    raw_outputs: sa.Table
    schema_version: sa.Table
    run_labels: sa.Table | None = None     # from version 3
    annotations: sa.Table | None = None    # from version 4
    baselines: sa.Table | None = None      # from version 5
    kept_changes: sa.Table | None = None   # from version 6


def _run_fk() -> sa.Column[int]:
    # Children go with their run, so deleting a run never leaves orphans behind.
    return sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"),
                     primary_key=True)


def _seq() -> sa.Column[int]:
    # Position in the RunRecord's list: loading gives the lists back in saved order.
    return sa.Column("seq", sa.Integer, primary_key=True)


def _bytes(name: str) -> sa.Column[bytes]:
    column: sa.Column[bytes] = sa.Column(name, sa.LargeBinary, nullable=False)
    return column


def _stored_as_is(table: sa.Table, conn: sa.Connection, **_kw: Any) -> None:
    # The blobs are zlib streams already: spare PostgreSQL a second try (TOAST).
    if conn.dialect.name == "postgresql":
        for column in table.columns:
            if isinstance(column.type, sa.LargeBinary):
                conn.execute(sa.text(
                    f"ALTER TABLE {table.name} ALTER COLUMN {column.name} SET STORAGE EXTERNAL"))


def _runs(md: sa.MetaData, version: int) -> sa.Table:
    columns: list[sa.Column[Any]] = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("experiment", sa.String, nullable=False),
        sa.Column("experiment_id", sa.String, index=True),
        sa.Column("test", sa.String, nullable=False),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("repetition", sa.Integer, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("error", sa.Text),
        # Double, not Float: PostgreSQL's REAL would round times and values to float32.
        sa.Column("started_at", sa.Double, nullable=False),
        sa.Column("duration_s", sa.Double, nullable=False),
        sa.Column("seed", sa.BigInteger),
        sa.Column("run_order", sa.Integer),
        sa.Column("measurement_version", sa.Integer, nullable=False),
        sa.Column("variant", sa.JSON, nullable=False),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
    ]
    if version >= 2:
        columns.append(sa.Column("hoplab_version", sa.String))
    runs = sa.Table("runs", md, *columns)
    if version >= 2:
        sa.Index("ix_runs_experiment_test", runs.c.experiment, runs.c.test)
    return runs


def _children(md: sa.MetaData) -> tuple[sa.Table, sa.Table, sa.Table]:
    """metrics, series and raw_outputs: the parts of a run, unchanged since version 1."""
    # The (run_id, seq) primary keys also serve as the run_id indexes.
    metrics = sa.Table(
        "metrics", md, _run_fk(), _seq(),
        sa.Column("name", sa.String, nullable=False, index=True),
        sa.Column("flow", sa.String),
        sa.Column("node", sa.String),
        sa.Column("key", sa.String),
        # Nullable because SQLite stores NaN as NULL; the store reads NULL back as NaN.
        sa.Column("value", sa.Double),
        sa.Column("unit", sa.String, nullable=False),
    )
    series = sa.Table(
        "series", md, _run_fk(), _seq(),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("unit", sa.String, nullable=False),
        sa.Column("node", sa.String),
        sa.Column("flow", sa.String),
        sa.Column("key", sa.String),
        sa.Column("n", sa.Integer, nullable=False),
        _bytes("t"),
        _bytes("v"),
    )
    raw_outputs = sa.Table(
        "raw_outputs", md, _run_fk(), _seq(),
        sa.Column("name", sa.String, nullable=False),
        sa.Column("media_type", sa.String, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        _bytes("data"),
    )
    sa.event.listen(series, "after_create", _stored_as_is)
    sa.event.listen(raw_outputs, "after_create", _stored_as_is)
    return metrics, series, raw_outputs


def _run_labels(md: sa.MetaData) -> sa.Table:
    # Every label and variant value of a run as text, one row each (both spellings of
    # a value that has two: True as "True" and "true"), so a filter on a label is an
    # index lookup. In the runs row they are JSON, which neither backend indexes
    # alike; scanning them took 2.8 s of 100,000 runs (bench/store_scale.py).
    table = sa.Table(
        "run_labels", md, _run_fk(),
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("value", sa.String, primary_key=True),
    )
    sa.Index("ix_run_labels_key_value", table.c.key, table.c.value, table.c.run_id)
    return table


def _annotations(md: sa.MetaData) -> sa.Table:
    # What happened to the lab, said by its users (`hoplab annotate`): on a label value
    # (version=v45: key and value) or at a time (at, Unix seconds); never both.
    return sa.Table(
        "annotations", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String),
        sa.Column("value", sa.String),
        sa.Column("at", sa.Double),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )


def _baselines(md: sa.MetaData) -> sa.Table:
    # The value a series' latest runs are judged against (`hoplab baseline`), instead of
    # the value before them: one per series. `series` is the series' identity as
    # analysis/changes.py spells it (JSON text: the store does not know what a series
    # is); `value` the pinned value of its order (a version, a commit, an experiment id
    # or a start time), as JSON; `runs` the ids of its runs when pinned (JSON list).
    return sa.Table(
        "baselines", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("series", sa.Text, nullable=False, unique=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("runs", sa.Text, nullable=False),
        sa.Column("selection", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )


def _kept_changes(md: sa.MetaData) -> sa.Table:
    # A series' judged changes (analysis/changes.py), kept so that the dashboard's home
    # need not judge every series again each time a server starts: valid while the
    # series' highest run id and number of runs are those judged, and `judge` (what
    # judged it: the figures followed, the detector, the baseline pinned) is the
    # reader's. `changes` is JSON the store does not read.
    return sa.Table(
        "kept_changes", md,
        sa.Column("series", sa.Text, primary_key=True),
        sa.Column("last_run", sa.BigInteger, nullable=False),
        sa.Column("runs", sa.Integer, nullable=False),
        sa.Column("judge", sa.Text, nullable=False),
        sa.Column("changes", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )


def build(version: int = SCHEMA_VERSION) -> Tables:
    """The tables at schema `version` (1 up to SCHEMA_VERSION)."""
    if not 1 <= version <= SCHEMA_VERSION:
        raise ValueError(f"no schema version {version}")
    md = sa.MetaData()
    runs = _runs(md, version)
    metrics, series, raw_outputs = _children(md)
    # One row per version applied: the highest is the database's version.
    schema_version = sa.Table(
        "schema_version", md,
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("applied_at", sa.Double, nullable=False),
    )
    return Tables(md, runs, metrics, series, raw_outputs, schema_version,
                  _run_labels(md) if version >= 3 else None,
                  _annotations(md) if version >= 4 else None,
                  _baselines(md) if version >= 5 else None,
                  _kept_changes(md) if version >= 6 else None)


TABLES = build()
