"""The fleet's tables: procrastinate's (its jobs, workers and their heartbeats), and
hoplab's own, beside the store's runs:

- hoplab_fleet_files: every file a submitted experiment names, by its SHA-256;
- hoplab_fleet_bundles: an experiment file and the files it names, by relative path,
  and their modes;
- hoplab_fleet_experiments: each submitted experiment, its bundle, seed and routing;
- hoplab_fleet_routes: the queue of each set of benches (--bench) and labels (--where);
- hoplab_fleet_benches: each bench, its labels, machine, state, heartbeat, current job;
- hoplab_fleet_errors: why a bench could not run a job at all (no run was stored);
- hoplab_fleet_handovers: each job put back in the queue because its bench went silent;
- hoplab_fleet_superseded: each run a bench stored after its job was handed on;
- hoplab_fleet_device_holders, hoplab_fleet_device_waits: who holds each device's lock,
  who waits for it and since when (rows of a dead session are ignored);
- hoplab_fleet_bisect_results: the answer of each commit job of `bisect run --fleet`
  (hoplab.fleet.bisect_jobs), one per job.

`ensure` creates what is missing, once, whoever comes first: under an advisory lock, so
two benches starting together never both apply procrastinate's schema.
"""

from __future__ import annotations

import psycopg

from hoplab.fleet.app import connect_kwargs, conninfo

# pg_advisory_xact_lock's key for creating the schema ("hoplab-fleet-schema").
_SCHEMA_LOCK = 0x686F706C6162

TABLES = """
CREATE TABLE IF NOT EXISTS hoplab_fleet_files (
    sha256 text PRIMARY KEY,
    size bigint NOT NULL,
    content bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_bundles (
    id text PRIMARY KEY,
    experiment text NOT NULL,
    files jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- Each file's permission bits, by relative path (a bundle stored before has none).
ALTER TABLE hoplab_fleet_bundles ADD COLUMN IF NOT EXISTS modes jsonb;
CREATE TABLE IF NOT EXISTS hoplab_fleet_routes (
    queue text PRIMARY KEY,
    benches jsonb NOT NULL,
    where_labels jsonb NOT NULL
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_experiments (
    id text PRIMARY KEY,
    bundle_id text NOT NULL REFERENCES hoplab_fleet_bundles(id),
    name text NOT NULL,
    seed bigint NOT NULL,
    jobs integer NOT NULL,
    queue text NOT NULL,
    labels jsonb NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    cancelled boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_benches (
    name text PRIMARY KEY,
    labels jsonb NOT NULL,
    machine text NOT NULL,
    pid integer NOT NULL,
    worker_id bigint,
    state text NOT NULL,
    heartbeat timestamptz NOT NULL DEFAULT now(),
    heartbeat_s real NOT NULL DEFAULT 10,
    current_job bigint,
    started_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_errors (
    job_id bigint PRIMARY KEY,
    bench text NOT NULL,
    error text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_handovers (
    job_id bigint NOT NULL,
    attempt integer NOT NULL,
    bench text,
    by_bench text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_superseded (
    run_id bigint PRIMARY KEY,
    job_id bigint NOT NULL,
    attempt integer NOT NULL,
    bench text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_device_holders (
    device text NOT NULL,
    backend integer NOT NULL,
    bench text NOT NULL,
    job_id bigint,
    since timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device, backend)
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_device_waits (
    device text NOT NULL,
    backend integer NOT NULL,
    bench text NOT NULL,
    job_id bigint,
    since timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device, backend)
);
CREATE TABLE IF NOT EXISTS hoplab_fleet_bisect_results (
    job_id bigint PRIMARY KEY,
    bisection text NOT NULL,
    commit text NOT NULL,
    bench text NOT NULL,
    result jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS hoplab_fleet_jobs_experiment
    ON procrastinate_jobs ((args->>'experiment_id'));
"""


ONE_OK_RUN_INDEX = "hoplab_fleet_one_ok_run"
# The store refuses a second ok run of a fleet job (label fleet_job), made by the first
# bench of a store that has runs; the duplicates an older hoplab let in are marked
# superseded first (the first ok run of each job stays).
ONE_OK_RUN = f"""
DO $$ BEGIN
    PERFORM pg_advisory_xact_lock({_SCHEMA_LOCK});
    IF to_regclass('runs') IS NOT NULL AND to_regclass('{ONE_OK_RUN_INDEX}') IS NULL THEN
        UPDATE runs SET status = 'superseded' WHERE status = 'ok'
            AND labels->>'fleet_job' IS NOT NULL AND id NOT IN (
                SELECT min(id) FROM runs WHERE status = 'ok'
                AND labels->>'fleet_job' IS NOT NULL GROUP BY labels->>'fleet_job');
        CREATE UNIQUE INDEX {ONE_OK_RUN_INDEX} ON runs ((labels->>'fleet_job'))
            WHERE status = 'ok' AND labels->>'fleet_job' IS NOT NULL;
    END IF;
END $$;
"""


def ensure(db_url: str | None) -> None:
    """procrastinate's schema (if its jobs table is missing) and hoplab's fleet tables."""
    from procrastinate.schema import SchemaManager

    with psycopg.connect(conninfo(db_url), **connect_kwargs()) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        row = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        if row is None or row[0] is None:
            conn.execute(SchemaManager.get_schema())
        conn.execute(TABLES)
