"""Submitting an experiment to the fleet, and asking how far it got.

    bundle_id = pack(db_url, Path("nat.toml"))          # the files, content-addressed
    experiment_id = enqueue(db_url, bundle_id, where={"device": "erx"},
                            labels={"schedule": "nightly"})
    finished(db_url, experiment_id)                      # True once no job waits or runs

pack(db_url: str | None, path: Path) -> str
    Load and validate the experiment (SpecError, exit 2, naming file, line and key),
    store it and every file it names (hoplab.fleet.queue.bundle) in the store; the bundle's id.
enqueue(db_url: str | None, bundle_id: str, *, benches: Sequence[str] = (),
        where: Mapping[str, str] = {}, labels: Mapping[str, str] = {}) -> str
    One job per variant x test x repetition, queued in the experiment's seeded order,
    for any of `benches` (all when empty) that has every label of `where`; `labels`
    are added to each run's labels. The experiment's id (its runs' experiment_id).
finished(db_url: str | None, experiment_id: str) -> bool
    No job of the experiment is waiting or running.
submitted(db_url: str | None, experiment_id: str) -> tuple[int, int]
    Its seed (a file without one gets a new one at each load) and its number of jobs.
cancel(db_url: str | None, experiment_id: str) -> int
    Its waiting jobs cancelled, its running ones asked to stop (their benches interrupt
    the run, store it cancelled and take the lab down); how many were waiting.

`db_url` is a store URL as --db takes it (None: $HOPLAB_DB); a SQLite store is a
UsageError naming PostgreSQL and docs/fleet.md.
"""

from __future__ import annotations

import json
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

import hoplab.kinds  # noqa: F401  (the loader asks the registry of kinds)
from hoplab.errors import UsageError
from hoplab.fleet.queue import bundle
from hoplab.fleet.queue.app import make_app, task
from hoplab.fleet.queue.db import connect
from hoplab.fleet.queue.routes import queue_of
from hoplab.fleet.queue.schema import QUEUE
from hoplab.run.experiment import schedule
from hoplab.spec.experiment_loader import load_experiment

_EMPTY: Mapping[str, str] = {}


def pack(db_url: str | None, path: Path) -> str:
    exp = load_experiment(path)
    bundle.named_files(exp)  # a file it may not bundle: refused before the store is asked
    with connect(db_url, tables=[QUEUE]) as conn:
        return bundle.store(conn, exp)


def enqueue(db_url: str | None, bundle_id: str, *, benches: Sequence[str] = (),
            where: Mapping[str, str] = _EMPTY, labels: Mapping[str, str] = _EMPTY) -> str:
    experiment_id = secrets.token_hex(6)
    queue = queue_of(benches, where)
    with connect(db_url, tables=[QUEUE]) as conn, \
            tempfile.TemporaryDirectory(prefix="hoplab-submit-") as d:
        exp = load_experiment(bundle.unpack(bundle.rows_of(conn), bundle_id, Path(d)))
        jobs = schedule(exp)
        with conn.transaction():
            conn.execute("INSERT INTO hoplab_fleet_routes (queue, benches, where_labels) "
                         "VALUES (%s, %s, %s) ON CONFLICT (queue) DO NOTHING",
                         (queue, json.dumps(sorted(set(benches))),
                          json.dumps(dict(sorted(where.items())))))
            conn.execute("INSERT INTO hoplab_fleet_experiments (id, bundle_id, name, seed, "
                         "jobs, queue, labels) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                         (experiment_id, bundle_id, exp.name, exp.seed, len(jobs), queue,
                          json.dumps(dict(labels))))
    app = make_app(db_url)
    with app.open():
        # In the seeded order: a queue hands out its jobs by id.
        task(app).configure(queue=queue).batch_defer(*[
            {"experiment_id": experiment_id, "bundle_id": bundle_id, "seed": exp.seed,
             "order": order,
             "variant": job.variant, "test": job.test, "repetition": job.repetition}
            for order, job in enumerate(jobs)])
    return experiment_id


def submitted(db_url: str | None, experiment_id: str) -> tuple[int, int]:
    """The seed the experiment was submitted with, and its number of jobs."""
    with connect(db_url, tables=[QUEUE]) as conn:
        row = conn.execute("SELECT seed, jobs FROM hoplab_fleet_experiments WHERE id = %s",
                           (experiment_id,)).fetchone()
    if row is None:
        raise UsageError(f"no experiment {experiment_id} was submitted to this store")
    return int(row[0]), int(row[1])


def job_states(conn: psycopg.Connection[tuple[Any, ...]], experiment_id: str
               ) -> dict[str, int]:
    """How many of the experiment's jobs are in each of procrastinate's states."""
    rows = conn.execute("SELECT status::text, count(*) FROM procrastinate_jobs "
                        "WHERE args->>'experiment_id' = %s GROUP BY status",
                        (experiment_id,)).fetchall()
    return {str(s): int(n) for s, n in rows}


def finished(db_url: str | None, experiment_id: str) -> bool:
    with connect(db_url, tables=[QUEUE]) as conn:
        states = job_states(conn, experiment_id)
    return not states.get("todo") and not states.get("doing")


def cancel(db_url: str | None, experiment_id: str) -> int:
    with connect(db_url, tables=[QUEUE]) as conn, conn.transaction():
        known = conn.execute("UPDATE hoplab_fleet_experiments SET cancelled = true "
                             "WHERE id = %s", (experiment_id,)).rowcount
        if not known:
            raise UsageError(f"no experiment {experiment_id} was submitted to this store")
        conn.execute("UPDATE procrastinate_jobs SET abort_requested = true WHERE status = "
                     "'doing' AND args->>'experiment_id' = %s", (experiment_id,))
        return conn.execute("UPDATE procrastinate_jobs SET status = 'cancelled' "
                            "WHERE status = 'todo' AND args->>'experiment_id' = %s",
                            (experiment_id,)).rowcount
