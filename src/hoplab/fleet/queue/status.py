"""What the fleet is doing, as data: the benches, the jobs by state, each experiment's
progress and every failure with its error (a run's, or a bisection's commit job's); the
jobs handed on from a silent bench, the runs a bench stored after that (superseded),
and who waits for which device. `hoplab fleet` prints it, `--json` dumps it,
the dashboard can render the same."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

from hoplab.errors import UsageError
from hoplab.fleet.queue.app import MEASURE_COMMIT
from hoplab.fleet.queue.db import connect
from hoplab.fleet.queue.schema import JOB_LABEL, QUEUE
from hoplab.store import open_store


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


@dataclass(frozen=True)
class Handover:
    """A job put back in the queue because its bench went silent."""

    job_id: int
    task: str
    attempt: int          # the attempt that was under way (the next one is attempt + 1)
    bench: str | None     # the silent bench, if its row still said it had the job
    by_bench: str         # the bench that put it back
    at: float


@dataclass(frozen=True)
class Superseded:
    """A run stored by a bench whose job had been handed on: kept, never counted."""

    run_id: int
    job_id: int
    attempt: int
    bench: str
    at: float


@dataclass(frozen=True)
class DeviceWait:
    """A job waiting for a device's lock, and who holds it (None: nobody now)."""

    device: str
    bench: str
    job_id: int | None
    since: float
    held_by: str | None
    held_job: int | None
    held_since: float | None


@dataclass(frozen=True)
class BisectionFailure:
    """A commit job of `bisect run --fleet` that failed, with its bench's error."""

    bisection: str
    commit: str
    job_id: int
    bench: str | None
    error: str


@dataclass
class FleetStatus:
    benches: list[Bench] = field(default_factory=list)
    jobs: dict[str, int] = field(default_factory=dict)
    experiments: list[ExperimentProgress] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    bisection_failures: list[BisectionFailure] = field(default_factory=list)
    handovers: list[Handover] = field(default_factory=list)
    superseded: list[Superseded] = field(default_factory=list)
    device_waits: list[DeviceWait] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"benches": [asdict(b) for b in self.benches], "jobs": self.jobs,
                "experiments": [asdict(e) | {"finished": e.finished}
                                for e in self.experiments],
                "failures": [asdict(f) for f in self.failures],
                "bisection_failures": [asdict(f) for f in self.bisection_failures],
                "handovers": [asdict(h) for h in self.handovers],
                "superseded": [asdict(r) for r in self.superseded],
                "device_waits": [asdict(w) for w in self.device_waits]}


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


def _recent(conn: psycopg.Connection[tuple[Any, ...]], table: str, sql: str
            ) -> list[tuple[Any, ...]]:
    """Rows of `sql`, none where `table` is missing (a fleet made by an older hoplab, read
    through the dashboard's session, which creates nothing)."""
    found = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    return [] if found is None or found[0] is None else conn.execute(sql).fetchall()


def _bisection_failures(conn: psycopg.Connection[tuple[Any, ...]]) -> list[BisectionFailure]:
    rows = conn.execute(
        "SELECT j.id, j.args->>'bisection', j.args->>'commit', e.bench, e.error FROM "
        "procrastinate_jobs j LEFT JOIN hoplab_fleet_errors e ON e.job_id = j.id WHERE "
        "j.status = 'failed' AND j.task_name = %s ORDER BY j.id DESC LIMIT 20",
        (MEASURE_COMMIT,)).fetchall()
    return [BisectionFailure(str(b), str(c), int(i), None if bench is None else str(bench),
                             str(error or "")) for i, b, c, bench, error in rows]


def _handovers(conn: psycopg.Connection[tuple[Any, ...]]) -> list[Handover]:
    rows = _recent(conn, "hoplab_fleet_handovers",
                   "SELECT h.job_id, coalesce(j.task_name, '?'), h.attempt, h.bench, "
                   "h.by_bench, extract(epoch FROM h.at) FROM hoplab_fleet_handovers h LEFT "
                   "JOIN procrastinate_jobs j ON j.id = h.job_id ORDER BY h.at DESC LIMIT 20")
    return [Handover(int(i), str(t), int(a), None if b is None else str(b), str(by),
                     float(at)) for i, t, a, b, by, at in rows]


def _superseded(conn: psycopg.Connection[tuple[Any, ...]]) -> list[Superseded]:
    rows = _recent(conn, "hoplab_fleet_superseded",
                   "SELECT run_id, job_id, attempt, bench, extract(epoch FROM at) FROM "
                   "hoplab_fleet_superseded ORDER BY at DESC LIMIT 20")
    return [Superseded(int(r), int(j), int(a), str(b), float(at)) for r, j, a, b, at in rows]


def _device_waits(conn: psycopg.Connection[tuple[Any, ...]]) -> list[DeviceWait]:
    # A row whose session is gone (its bench died) says nothing any more.
    live = "backend IN (SELECT pid FROM pg_stat_activity)"
    rows = _recent(conn, "hoplab_fleet_device_waits",
                   "SELECT w.device, w.bench, w.job_id, extract(epoch FROM w.since), h.bench, "
                   "h.job_id, extract(epoch FROM h.since) FROM hoplab_fleet_device_waits w "
                   "LEFT JOIN LATERAL (SELECT * FROM hoplab_fleet_device_holders h WHERE "
                   f"h.device = w.device AND h.{live} ORDER BY h.since LIMIT 1) h ON true "
                   f"WHERE w.{live} ORDER BY w.since")
    return [DeviceWait(str(d), str(b), None if j is None else int(j), float(since),
                       None if hb is None else str(hb), None if hj is None else int(hj),
                       None if hs is None else float(hs))
            for d, b, j, since, hb, hj, hs in rows]


def fleet_status(db_url: str | None, *, experiments: int = 20) -> FleetStatus:
    """The fleet's state now: every bench, the jobs by state, the last `experiments`
    submitted and the failures among their jobs."""
    with connect(db_url, tables=[QUEUE]) as conn:
        return _status(conn, db_url, experiments)


def read_fleet_status(db_url: str | None, *, experiments: int = 20) -> FleetStatus | None:
    """As fleet_status, in a session that writes nothing (the dashboard's); None where
    no bench or submit ever made the fleet's tables."""
    with connect(db_url, read_only=True) as conn:
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
    status.bisection_failures = _bisection_failures(conn)
    status.handovers = _handovers(conn)
    status.superseded = _superseded(conn)
    status.device_waits = _device_waits(conn)
    return status


def drain(db_url: str | None, bench: str) -> str:
    """Ask bench `bench` (each of its workers, with --concurrency) to finish its run and
    stop; its state before (of its first worker)."""
    with connect(db_url, tables=[QUEUE]) as conn:
        row = conn.execute("UPDATE hoplab_fleet_benches b SET state = 'draining' FROM "
                           "(SELECT name, state FROM hoplab_fleet_benches WHERE name = %s "
                           "OR name LIKE %s FOR UPDATE) old WHERE b.name = old.name "
                           "RETURNING old.state",
                           (bench, bench.replace("\\", "\\\\").replace("%", "\\%")
                            .replace("_", "\\_") + "#%")).fetchone()
    if row is None:
        raise UsageError(f"no bench {bench} in this fleet (hoplab fleet lists them)")
    return str(row[0])
