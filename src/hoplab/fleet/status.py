"""What the fleet is doing, as data: the benches, the jobs by state, each experiment's
progress and every failure with its error. `hoplab fleet` prints it, `--json` dumps it,
the dashboard can render the same."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg


@dataclass(frozen=True)
class Bench:
    name: str
    labels: dict[str, str]
    machine: str
    state: str            # idle, busy, draining, stopped, gone
    last_heartbeat: float  # Unix seconds
    current_job: int | None


@dataclass(frozen=True)
class ExperimentProgress:
    id: str
    name: str
    submitted_at: float
    jobs: int
    states: dict[str, int]  # procrastinate's: todo, doing, succeeded, failed, cancelled
    cancelled: bool

    @property
    def finished(self) -> bool:
        return not self.states.get("todo") and not self.states.get("doing")


@dataclass(frozen=True)
class Failure:
    experiment_id: str
    job_id: int
    bench: str | None
    error: str
    run_id: int | None  # the failed run, when one was stored


@dataclass
class FleetStatus:
    benches: list[Bench] = field(default_factory=list)
    jobs: dict[str, int] = field(default_factory=dict)
    experiments: list[ExperimentProgress] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"benches": [asdict(b) for b in self.benches], "jobs": self.jobs,
                "experiments": [asdict(e) | {"finished": e.finished}
                                for e in self.experiments],
                "failures": [asdict(f) for f in self.failures]}


def _benches(conn: psycopg.Connection[tuple[Any, ...]]) -> list[Bench]:
    # Gone: silent for 3 heartbeats, when the other benches put its job back in the queue.
    rows = conn.execute(
        "SELECT name, labels, machine, state, extract(epoch FROM heartbeat), current_job, "
        "extract(epoch FROM now() - heartbeat) > 3 * heartbeat_s FROM hoplab_fleet_benches "
        "ORDER BY name").fetchall()
    return [Bench(str(name), dict(labels), str(machine),
                  "gone" if state != "stopped" and silent else str(state),
                  float(beat), None if job is None else int(job))
            for name, labels, machine, state, beat, job, silent in rows]


def _experiments(conn: psycopg.Connection[tuple[Any, ...]], limit: int
                 ) -> list[ExperimentProgress]:
    rows = conn.execute(
        "SELECT e.id, e.name, extract(epoch FROM e.submitted_at), e.jobs, e.cancelled, "
        "coalesce((SELECT jsonb_object_agg(s, n) FROM (SELECT status::text AS s, count(*) "
        "AS n FROM procrastinate_jobs j WHERE j.args->>'experiment_id' = e.id "
        "GROUP BY status) c), '{}'::jsonb) FROM hoplab_fleet_experiments e "
        "ORDER BY e.submitted_at DESC LIMIT %s", (limit,)).fetchall()
    return [ExperimentProgress(str(i), str(n), float(at), int(jobs),
                               {str(k): int(v) for k, v in dict(states).items()},
                               bool(cancelled))
            for i, n, at, jobs, cancelled, states in rows]


def _failures(conn: psycopg.Connection[tuple[Any, ...]], store_url: str | None,
              experiment_ids: list[str]) -> list[Failure]:
    """Jobs that failed: the error of their failed run (from the store), else of the
    bench that could not run them."""
    rows = conn.execute(
        "SELECT j.id, j.args->>'experiment_id', e.bench, e.error FROM procrastinate_jobs j "
        "LEFT JOIN hoplab_fleet_errors e ON e.job_id = j.id WHERE j.status = 'failed' "
        "AND j.args->>'experiment_id' = ANY(%s) ORDER BY j.id", (experiment_ids,)).fetchall()
    if not rows:
        return []
    from hoplab.fleet.jobs import JOB_LABEL
    from hoplab.store import open_store

    out = []
    with open_store(store_url, read_only=True) as store:
        for job_id, experiment_id, bench, error in rows:
            runs = [r for r in store.list_runs({"experiment_id": str(experiment_id),
                                                JOB_LABEL: str(job_id)}, figures=False)
                    if r.status != "ok"]
            run = runs[-1] if runs else None
            if run is not None and error is None:
                bench = run.labels.get("bench")
                error = store.get_run(run.id, series=False).error
            out.append(Failure(str(experiment_id), int(job_id), bench, str(error or ""),
                               run.id if run else None))
    return out


def fleet_status(db_url: str | None, *, experiments: int = 20) -> FleetStatus:
    """The fleet's state now: every bench, the jobs by state, the last `experiments`
    submitted and the failures among their jobs."""
    from hoplab.fleet.submit import connect

    with connect(db_url) as conn:
        return _status(conn, db_url, experiments)


def read_fleet_status(db_url: str | None, *, experiments: int = 20) -> FleetStatus | None:
    """As fleet_status, in a session that writes nothing (the dashboard's); None where
    no bench or submit ever made the fleet's tables."""
    from hoplab.fleet.submit import connect

    with connect(db_url, create=False) as conn:
        found = conn.execute("SELECT to_regclass('hoplab_fleet_benches'), "
                             "to_regclass('procrastinate_jobs')").fetchone()
        if found is None or None in found:
            return None
        return _status(conn, db_url, experiments)


def _status(conn: psycopg.Connection[tuple[Any, ...]], db_url: str | None,
            experiments: int) -> FleetStatus:
    status = FleetStatus(benches=_benches(conn))
    status.jobs = {str(s): int(n) for s, n in conn.execute(
        "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status "
        "ORDER BY status").fetchall()}
    status.experiments = _experiments(conn, experiments)
    status.failures = _failures(conn, db_url, [e.id for e in status.experiments])
    return status


def drain(db_url: str | None, bench: str) -> str:
    """Ask bench `bench` (each of its workers, with --concurrency) to finish its run and
    stop; its state before (of its first worker)."""
    from hoplab.errors import UsageError
    from hoplab.fleet.submit import connect

    with connect(db_url) as conn:
        row = conn.execute("UPDATE hoplab_fleet_benches b SET state = 'draining' FROM "
                           "(SELECT name, state FROM hoplab_fleet_benches WHERE name = %s "
                           "OR name LIKE %s FOR UPDATE) old WHERE b.name = old.name "
                           "RETURNING old.state",
                           (bench, bench.replace("\\", "\\\\").replace("%", "\\%")
                            .replace("_", "\\_") + "#%")).fetchone()
    if row is None:
        raise UsageError(f"no bench {bench} in this fleet (hoplab fleet lists them)")
    return str(row[0])
