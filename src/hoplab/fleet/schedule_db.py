"""Where schedules, their firings and their alerts live: tables of their own in the
team's PostgreSQL store, beside the runs and the fleet's queue.

Created with CREATE TABLE IF NOT EXISTS on first use, so that any hoplab that reaches
the store (a bench's tick, `hoplab schedule add`, the dashboard) finds them. The
alert URL is a secret (a Slack webhook): it is kept in one column, hoplab_fleet_schedules'
alert_url, and read only by the code that POSTs to it (fleet/alert_post.py)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from hoplab.errors import UsageError

Conn = psycopg.Connection[dict[str, Any]]

DDL = (
    """CREATE TABLE IF NOT EXISTS hoplab_fleet_schedules (
        name text PRIMARY KEY,
        cron text NOT NULL,
        tz text NOT NULL,
        experiment text NOT NULL,          -- the experiment's name
        source text NOT NULL,              -- its file, as `schedule add` was given it
        bundle text NOT NULL,              -- what pack() stored: the files as they were
        benches jsonb NOT NULL,            -- --bench NAME...
        "where" jsonb NOT NULL,            -- --where KEY=VALUE...
        alert_url text,                    -- secret: never printed whole, never logged
        dashboard_url text,
        added_at timestamptz NOT NULL)""",
    # --alert-link-local: the alert URL may be a link-local or metadata address.
    """ALTER TABLE hoplab_fleet_schedules
        ADD COLUMN IF NOT EXISTS alert_link_local boolean NOT NULL DEFAULT false""",
    """CREATE TABLE IF NOT EXISTS hoplab_fleet_firings (
        id bigserial PRIMARY KEY,
        schedule text NOT NULL,
        due timestamptz NOT NULL,
        experiment_id text,                -- what enqueue() answered
        fired_at timestamptz NOT NULL,
        judged_at timestamptz,
        UNIQUE (schedule, due))""",
    """CREATE TABLE IF NOT EXISTS hoplab_fleet_alerts (
        id bigserial PRIMARY KEY,
        schedule text NOT NULL,
        kind text NOT NULL,                -- worse, failed, gone
        key text NOT NULL UNIQUE,          -- what it is about: never two alerts for it
        text text NOT NULL,
        payload jsonb NOT NULL,
        state text NOT NULL,               -- pending, sent, failed
        attempts integer NOT NULL DEFAULT 0,
        last_error text,
        created_at timestamptz NOT NULL,
        next_at timestamptz NOT NULL,      -- when the next attempt may be made
        sent_at timestamptz)""",
)


def connect(db_url: str | None, *, create: bool = True) -> Conn:
    """A connection to the store with the tables above (created if missing); without
    `create`, one that writes nothing (whoever only reads: the dashboard)."""
    from hoplab.fleet.app import connect_kwargs, conninfo
    from hoplab.store.url import hide_password

    info = conninfo(db_url)     # a SQLite store: UsageError naming PostgreSQL
    try:
        # Autocommit: a statement outside `with conn.transaction()` is its own
        # transaction, and a transaction() block is a real one (not a savepoint in an
        # implicit transaction left open), so its locks end when it does.
        conn: Conn = psycopg.connect(info, row_factory=dict_row, autocommit=True,
                                     **connect_kwargs(read_only=not create))
    except psycopg.Error as exc:
        raise UsageError(f"cannot reach the store: {hide_password(str(exc).strip())}"
                         ) from None
    if not create:
        return conn
    try:
        with conn.transaction():
            # Two first uses at once would race on the catalogue: one at a time.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('hoplab schedules'))")
            for statement in DDL:
                conn.execute(statement)
    except BaseException:
        conn.close()
        raise
    return conn
