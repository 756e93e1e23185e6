"""Where a store lives (a SQLite path or a database URL), how to name it, how to connect."""

from __future__ import annotations

import os
import re
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

# By their own names, not through the package (which imports this module lazily).
import hoplab.store.budget as budget
import hoplab.store.migrations as migrations
from hoplab.errors import UsageError

DEFAULT_PATH = "./hoplab.db"

# How long a SQLite writer waits for another one before giving up: saving a run
# takes milliseconds, so a long wait means something is stuck.
BUSY_TIMEOUT_S = 30.0
PG_CONNECT_TIMEOUT_S = 10

Backend = Literal["sqlite", "postgresql"]

# From "://user:" to the last "@" of the word: a password may hold "/", ":" or even
# an unencoded "@"; masking too much of a malformed URL is better than too little.
_PASSWORD = re.compile(r"(://[^:/@\s]*:)\S*@")
# libpq also takes the password as a query parameter: postgresql://u@h/db?password=...
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&\s'\"]*", re.IGNORECASE)


@dataclass(frozen=True)
class StoreLocation:
    backend: Backend
    url: sa.URL          # what SQLAlchemy connects to (may hold a password)
    description: str     # what the user sees: never a password

    def __str__(self) -> str:
        return self.description


def hide_password(text: str) -> str:
    """`text` (a driver's message, say) with the password of any URL in it as ***."""
    return _QUERY_PASSWORD.sub(r"\1***", _PASSWORD.sub(r"\1***@", text))


def redact(text: str, url: str | None) -> str:
    """`text` (another program's output, say) with the password of `url` masked wherever
    it appears, as written in the URL or decoded, and that of any other URL in it."""
    if url and "://" in url:
        try:
            parsed = sa.make_url(url)
            given = parsed.query.get("password", ())
            spellings = {str(parsed.password or ""),
                         *([given] if isinstance(given, str) else given)}
        except (sa.exc.ArgumentError, ValueError):
            spellings = set()
        # As written: percent-encoded, or not at all parsed.
        spellings |= {m.group(0)[len(m.group(1)):-1] for m in _PASSWORD.finditer(url)}
        spellings |= {m.group(0)[len(m.group(1)):] for m in _QUERY_PASSWORD.finditer(url)}
        for secret in sorted(spellings - {""}, key=len, reverse=True):
            text = text.replace(secret, "***")
    return hide_password(text)


def shown_url(url: str) -> str:
    """`url` as it may be printed: SQLAlchemy's own rendering with the password masked,
    or, for a URL it cannot parse, hide_password's."""
    try:
        # SQLAlchemy masks the password before the host, not one in the query.
        return hide_password(sa.make_url(url).render_as_string(hide_password=True))
    except (sa.exc.ArgumentError, ValueError):
        return hide_password(url)


def _sqlite(path: str) -> StoreLocation:
    if path in ("", ":memory:"):
        return StoreLocation("sqlite", sa.URL.create("sqlite"), "sqlite :memory:")
    # Absolute, so that a pooled connection opened after a chdir finds the same file.
    absolute = os.path.abspath(os.path.expanduser(path))
    return StoreLocation("sqlite", sa.URL.create("sqlite", database=absolute), f"sqlite {path}")


def has_password(url: str) -> bool:
    """Whether a store URL holds a password (in its user part or as ?password=)."""
    if "://" not in url:
        return False
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return ":" in url.split("://", 1)[1].split("@", 1)[0] if "@" in url else False
    return bool(parsed.password) or "password" in parsed.query


def parse_location(url: str | None) -> StoreLocation:
    """None: ./hoplab.db; a path: SQLite there; else a sqlite:// or postgresql:// URL."""
    if url is None:
        return _sqlite(DEFAULT_PATH)
    if "://" not in url:
        return _sqlite(url)
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError) as exc:  # ValueError: a port not a number
        raise UsageError(f"bad store URL {shown_url(url)}: {exc}") from None
    scheme = parsed.drivername
    if scheme == "sqlite":
        return _sqlite(parsed.database or "")
    if scheme in ("postgres", "postgresql", "postgresql+psycopg"):
        parsed = parsed.set(drivername="postgresql+psycopg")
        service = parsed.query.get("service")
        # A libpq service (pg_service.conf) names the host, database and user itself.
        if not parsed.database and not service:
            raise UsageError(f"bad store URL {shown_url(url)}: no database name")
        user = f"{parsed.username}@" if parsed.username else ""
        host = parsed.host or ("" if service else "localhost")
        port = f":{parsed.port}" if parsed.port else ""
        description = f"postgresql://{user}{host}{port}/{parsed.database or ''}" + \
            (f"?service={service}" if service else "")
        return StoreLocation("postgresql", parsed, description)
    raise UsageError(
        f"bad store URL {shown_url(url)}: unsupported scheme {scheme!r} "
        "(use a file path, sqlite:///PATH or postgresql://USER@HOST:PORT/DB)"
    )


def _enable_wal(cursor: Any) -> None:
    # WAL: readers (hoplab show, a notebook) never block the experiment's writes.
    # It persists in the file, so it is switched on once. The switch fails at
    # once with "database is locked" while another connection opens the file
    # (SQLite does not call the busy handler there), hence the retries.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _read_only_url(url: sa.URL) -> sa.URL:
    # SQLite's own read-only open (a file: URI with mode=ro): the file is never written,
    # whatever a statement tries, and a missing file is an error rather than created.
    path = urllib.parse.quote(url.database or "")
    return url.set(database=f"file:{path}", query={"mode": "ro", "uri": "true"})


def _sqlite_engine(location: StoreLocation, read_only: bool) -> sa.Engine:
    url = _read_only_url(location.url) if read_only and location.url.database else location.url
    engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        # sqlite3's own transaction handling skips BEGIN before DDL, which would
        # make migrations non-transactional: SQLAlchemy emits BEGIN itself below.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if not read_only:
            _enable_wal(cursor)
        dbapi_conn.set_progress_handler(budget.progress_handler, budget.PROGRESS_STEPS)
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        write = conn.get_execution_options().get(migrations.WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _pg_engine(location: StoreLocation, read_only: bool) -> sa.Engine:
    connect_args: dict[str, Any] = {}
    if "connect_timeout" not in location.url.query:
        # An unreachable host would otherwise hang for the TCP timeout (minutes).
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    if read_only:
        # Every transaction of the session is read-only: the server refuses any write.
        given = location.url.query.get("options", "")
        given = given if isinstance(given, str) else " ".join(given)
        connect_args["options"] = f"{given} -c default_transaction_read_only=on".strip()
    return sa.create_engine(location.url, connect_args=connect_args)


def create_engine(location: StoreLocation, *, read_only: bool = False) -> sa.Engine:
    """An engine on the store; `read_only`: one that cannot write it (nor switch on WAL)."""
    if location.backend == "sqlite":
        return _sqlite_engine(location, read_only)
    return _pg_engine(location, read_only)
