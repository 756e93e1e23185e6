"""Where schedules, their firings and their alerts live: tables of their own in the
team's PostgreSQL store, beside the runs and the fleet's queue.

Created (fleet/queue/db.py's connect, tables=[SCHEDULES]) on first use, so that any
hoplab that reaches the store (a bench's tick, `hoplab schedule add`) finds them. The
alert URL is a secret (a Slack webhook): it is kept in one column, hoplab_fleet_schedules'
alert_url, and read only by the code that POSTs to it (fleet/schedule/alert_post.py)."""

from __future__ import annotations

from typing import Any

import psycopg

from hoplab.fleet.queue.db import Tables

# A connection of db.connect(url, tables=[SCHEDULES], row_factory=dict_row).
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

# Two first uses at once would race on the catalogue: one at a time.
SCHEDULES = Tables("hoplab schedules", DDL)
