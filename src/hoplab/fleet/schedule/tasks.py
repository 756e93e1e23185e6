"""The schedules' minute tick as a procrastinate periodic task on the fleet's App.

procrastinate defers `schedules:tick` once per minute whoever runs its deferrer (its
periodic defers are unique per task and minute in the store), on a queue of its own
that benches' `hoplab worker` never takes jobs from: a tick never waits for a run,
and a run never waits for a tick. `hoplab schedule serve` runs the worker that
defers and executes it (one or several, on any machine that reaches the store). The
job carries the minute it was due, which tick takes as its clock; its arguments hold
nothing secret (procrastinate logs them)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from hoplab.fleet.queue import schema
from hoplab.fleet.queue.app import make_app
from hoplab.fleet.queue.db import connect
from hoplab.fleet.schedule.firing import tick as run_tick

if TYPE_CHECKING:
    import procrastinate

QUEUE = "hoplab-schedules"
TASK = "schedules:tick"


def blueprint(db_url: str | None) -> procrastinate.Blueprint:
    import procrastinate

    bp = procrastinate.Blueprint()

    @bp.periodic(cron="* * * * *", periodic_id="tick")
    @bp.task(name="tick", queue=QUEUE)
    def tick(timestamp: int) -> None:
        run_tick(db_url, dt.datetime.fromtimestamp(timestamp, dt.UTC))

    return bp


def app(db_url: str | None) -> procrastinate.App:
    """The fleet's App (fleet/queue/app.py) with the tick registered on it."""
    connect(db_url, tables=[schema.QUEUE]).close()
    found = make_app(db_url)
    found.add_tasks_from(blueprint(db_url), namespace="schedules")
    return found


def serve(db_url: str | None, *, wait: bool = True) -> None:
    """Defer and run the tick every minute until stopped (SIGINT or SIGTERM); without
    `wait`, run the ticks already queued and return."""
    app(db_url).run_worker(queues=[QUEUE], wait=wait, concurrency=1,
                           name="hoplab-schedules", install_signal_handlers=wait,
                           # 1,440 ticks a day: a done one is of no use to keep.
                           delete_jobs="successful")
