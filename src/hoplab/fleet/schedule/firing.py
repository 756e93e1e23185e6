"""tick: what the fleet does about its schedules each minute (a procrastinate periodic
task on the benches, fleet/schedule/tasks.py; tests call it with a clock they hold).

1. Fire: every schedule whose latest due time (at or before now, after it was added)
   has no firing yet is submitted, its runs labelled schedule=NAME. The firing's row is
   inserted under the unique key (schedule, due) in the transaction that submits it:
   a second bench's tick at the same minute waits on that key, then finds it taken, so
   one due time is submitted once however many benches tick.
2. Judge: every firing whose jobs have all finished and that has not been judged is
   taken under a row lock, judged against the previous firing (fleet/schedule/judge.py) and, if
   something got worse or failed, an alert is stored (fleet/schedule/alerts.py).
3. Benches gone for more than GONE_AFTER: one alert per bench and disappearance, to
   each schedule with an alert URL whose jobs it could take.
4. Send: the alerts due for an attempt are POSTed (fleet/schedule/alert_post.py).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from psycopg.rows import dict_row

from hoplab.errors import HoplabError
from hoplab.fleet.queue.db import connect
from hoplab.fleet.schedule import alerts
from hoplab.fleet.schedule.alert_post import Attempt, send_due
from hoplab.fleet.schedule.judge import Alerted, Key, judge_firing, key
from hoplab.fleet.schedule.queue_fleet import Bench, QueueFleet
from hoplab.fleet.schedule.schedules import Schedule, ScheduleError, schedules
from hoplab.fleet.schedule.tables import SCHEDULES, Conn
from hoplab.store import open_store

GONE_AFTER = dt.timedelta(minutes=10)


@dataclass
class Tick:
    fired: list[tuple[str, str]] = field(default_factory=list)    # (schedule, experiment id)
    judged: list[tuple[str, str]] = field(default_factory=list)
    alerts: list[int] = field(default_factory=list)
    sent: list[Attempt] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)   # (schedule, why)


def tick(db_url: str | None, now: dt.datetime) -> Tick:
    """Do what is due at `now` (an aware datetime); see the module doc."""
    fleet = QueueFleet(db_url)
    done = Tick()
    with connect(db_url, tables=[SCHEDULES], row_factory=dict_row) as conn:
        for s in schedules(conn):
            try:
                fired = _fire(conn, fleet, s, now)
            except HoplabError as exc:
                # Its packed files no longer load (a newer hoplab refuses them, say), or
                # its times cannot be computed (ScheduleError): the others still fire,
                # and the team is told once per due time (or broken definition).
                done.errors.append((s.name, str(exc)))
                done.alerts += _cannot_submit(conn, s, now, str(exc))
                continue
            if fired is not None:
                done.fired.append((s.name, fired))
        _judge(conn, db_url, fleet, now, done)
        done.alerts += _gone(conn, fleet, now)
    done.sent = send_due(db_url, now)
    return done


def _fire(conn: Conn, fleet: QueueFleet, s: Schedule, now: dt.datetime) -> str | None:
    due = s.due(now)
    if due < s.added_at:
        return None         # its last due time came before it was added
    with conn.transaction():
        row = conn.execute(
            """INSERT INTO hoplab_fleet_firings (schedule, due, fired_at) VALUES (%s, %s, %s)
               ON CONFLICT (schedule, due) DO NOTHING RETURNING id""",
            (s.name, due, now)).fetchone()
        if row is None:
            return None
        experiment_id = fleet.enqueue(s.bundle, benches=s.benches, where=s.where,
                                      labels={"schedule": s.name})
        conn.execute("UPDATE hoplab_fleet_firings SET experiment_id = %s WHERE id = %s",
                     (experiment_id, row["id"]))
    return experiment_id


def _cannot_submit(conn: Conn, s: Schedule, now: dt.datetime, why: str) -> list[int]:
    document = {"text": f"{s.name}: could not submit {s.experiment}: {why}",
                "schedule": s.name, "kind": "failed", "changes": [], "failed": [],
                "benches_gone": []}
    try:
        when = s.due(now).isoformat()
    except ScheduleError:  # no due time to tell once per: once per broken definition
        when = f"never:{s.cron}:{s.tz}"
    with conn.transaction():
        made = alerts.record(conn, key=f"submit:{s.name}:{when}",
                             document=document, has_url=s.alert is not None, now=now)
    return [] if made is None else [made]


def _judge(conn: Conn, db_url: str | None, fleet: QueueFleet, now: dt.datetime,
           done: Tick) -> None:
    pending = conn.execute(
        """SELECT id FROM hoplab_fleet_firings
           WHERE judged_at IS NULL AND experiment_id IS NOT NULL ORDER BY due""").fetchall()
    for firing in (r["id"] for r in pending):
        try:
            _judge_one(conn, db_url, fleet, now, done, firing)
        except HoplabError as exc:      # the store unreadable now: judged at a later tick
            done.errors.append((f"firing {firing}", str(exc)))


def _judge_one(conn: Conn, db_url: str | None, fleet: QueueFleet, now: dt.datetime,
               done: Tick, firing: int) -> None:
    with conn.transaction():
        row = conn.execute(
            """SELECT f.*, s.dashboard_url, s.alert_url IS NOT NULL AS has_url
               FROM hoplab_fleet_firings f
               LEFT JOIN hoplab_fleet_schedules s ON s.name = f.schedule
               WHERE f.id = %s AND f.judged_at IS NULL FOR UPDATE OF f SKIP LOCKED""",
            (firing,)).fetchone()
        if row is None or not fleet.finished(row["experiment_id"]):
            return
        before = conn.execute(
            """SELECT experiment_id FROM hoplab_fleet_firings
               WHERE schedule = %s AND due < %s AND experiment_id IS NOT NULL
               ORDER BY due DESC LIMIT 1""",
            (row["schedule"], row["due"])).fetchone()
        previous = None if before is None else before["experiment_id"]
        with open_store(db_url, read_only=True) as store:
            verdict = judge_firing(store, row["schedule"], previous, row["experiment_id"],
                                   alerted=_alerted(conn))
        document = alerts.firing_document(
            row["schedule"], verdict, dashboard=row["dashboard_url"],
            experiment_id=row["experiment_id"], previous=previous)
        if document is not None:
            made = alerts.record(conn, key=f"firing:{firing}", document=document,
                                 has_url=bool(row["has_url"]), now=now)
            done.alerts += [] if made is None else [made]
        conn.execute("UPDATE hoplab_fleet_firings SET judged_at = %s WHERE id = %s",
                     (now, firing))
        done.judged.append((row["schedule"], row["experiment_id"]))


def _alerted(conn: Conn) -> Alerted:
    """The figures each firing's alert named (so a change point found later over the
    history is not told twice)."""
    def told(experiment_id: str) -> set[Key]:
        rows = conn.execute(
            """SELECT payload->'changes' AS changes FROM hoplab_fleet_alerts
               WHERE payload->>'experiment_id' = %s""", (experiment_id,)).fetchall()
        return {key(c["experiment"], c["test"], c["variant"], c["metric"])
                for r in rows for c in r["changes"] or ()}
    return told


def _serves(s: Schedule, bench: Bench) -> bool:
    """Whether `bench` could take the schedule's jobs (its --bench and --where)."""
    if s.benches and bench.name not in s.benches:
        return False
    return all(bench.labels.get(k) == v for k, v in s.where.items())


def _gone(conn: Conn, fleet: QueueFleet, now: dt.datetime) -> list[int]:
    made: list[int] = []
    gone = [b for b in fleet.benches() if now - b.last_heartbeat > GONE_AFTER]
    if not gone:
        return made
    with conn.transaction():
        for s in schedules(conn):
            for b in gone:
                if s.alert is None or not _serves(s, b):
                    continue
                doc = alerts.gone_document(s.name, b.name, b.labels, b.last_heartbeat, now)
                # One alert per disappearance: a bench back and gone again alerts again.
                key = f"gone:{s.name}:{b.name}:{b.last_heartbeat.isoformat()}"
                found = alerts.record(conn, key=key, document=doc, has_url=True, now=now)
                made += [] if found is None else [found]
    return made
