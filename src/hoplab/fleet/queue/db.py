"""The fleet's one way to its store: a connection, and its tables made where missing.

The connection is libpq's, from the store URL: the password comes from the URL only if
the user put it there, else from ~/.pgpass or $PGPASSFILE as for every libpq client.
A fleet command on a SQLite store is a UsageError naming PostgreSQL and docs/fleet.md;
a store it cannot reach, one naming the store (its password hidden).

Each part of the fleet declares its tables as `Tables` (the queue's in schema.py, the
schedules' in hoplab.fleet.schedule.tables, the bisections' in hoplab.fleet.bisect.jobs)
and `connect` makes those it is given, once, whoever comes first: under the set's
advisory lock, in one transaction, so two benches starting together never both apply
them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import psycopg
from psycopg.rows import RowFactory

from hoplab.errors import UsageError
from hoplab.store.url import hide_password, parse_location

CONNECT_TIMEOUT_S = 10
Row = TypeVar("Row")


@dataclass(frozen=True)
class Tables:
    """Tables made together. `lock` is the advisory lock their making holds: a number,
    or a text hashed by the server (hashtext), as hoplabs before this one took it.
    `first` runs before the statements, in the same transaction (procrastinate's schema,
    applied only where missing)."""

    lock: int | str
    statements: tuple[str, ...]
    first: Callable[[psycopg.Connection[Any]], None] | None = None


def conninfo(db_url: str | None) -> str:
    """libpq's connection string for the PostgreSQL store `db_url` (--db or $HOPLAB_DB)."""
    location = parse_location(db_url)
    if location.backend != "postgresql":
        raise UsageError(f"the fleet needs a PostgreSQL store (--db postgresql://USER@HOST/DB "
                         f"or $HOPLAB_DB), not {location.description}: see docs/fleet.md")
    url = location.url.set(drivername="postgresql")
    text: str = url.render_as_string(hide_password=False)
    return text


def connect_kwargs(*, read_only: bool = False) -> dict[str, Any]:
    """psycopg.connect's keywords; `read_only`: a session the server refuses any write
    (whoever only reads: the dashboard)."""
    kwargs: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S}
    if read_only:
        kwargs["options"] = "-c default_transaction_read_only=on"
    return kwargs


@overload
def connect(db_url: str | None, *, tables: Sequence[Tables] = ..., read_only: bool = ...
            ) -> psycopg.Connection[tuple[Any, ...]]: ...


@overload
def connect(db_url: str | None, *, tables: Sequence[Tables] = ..., read_only: bool = ...,
            row_factory: RowFactory[Row]) -> psycopg.Connection[Row]: ...


def connect(db_url: str | None, *, tables: Sequence[Tables] = (), read_only: bool = False,
            row_factory: RowFactory[Any] | None = None) -> psycopg.Connection[Any]:
    """A connection to the store's PostgreSQL with `tables` made where missing; rows as
    tuples unless `row_factory` says otherwise (psycopg.rows.dict_row).

    Autocommit: a statement outside `with conn.transaction()` is its own transaction,
    and a transaction() block is a real one (not a savepoint in an implicit transaction
    left open), so its locks end when it does."""
    info = conninfo(db_url)     # a SQLite store: UsageError naming PostgreSQL
    kwargs: dict[str, Any] = {"autocommit": True, **connect_kwargs(read_only=read_only)}
    if row_factory is not None:
        kwargs["row_factory"] = row_factory
    try:
        conn: psycopg.Connection[Any] = psycopg.connect(info, **kwargs)
    except psycopg.OperationalError as e:
        raise UsageError(unreachable(e)) from None
    try:
        for made in tables:
            _make(conn, made)
    except BaseException:
        conn.close()
        raise
    return conn


def unreachable(e: Exception) -> str:
    """The one wording of a store the fleet cannot reach."""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"cannot reach the fleet's store: {hide_password(first)}"


def _make(conn: psycopg.Connection[Any], tables: Tables) -> None:
    with conn.transaction():
        if isinstance(tables.lock, int):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (tables.lock,))
        else:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (tables.lock,))
        if tables.first is not None:
            tables.first(conn)
        for statement in tables.statements:
            conn.execute(statement)
