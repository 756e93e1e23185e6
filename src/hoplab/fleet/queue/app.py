"""The procrastinate App on a store's PostgreSQL, and the one task every job is a call of.

Its connection is the store's, as fleet/queue/db.py makes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hoplab.fleet.queue.db import connect_kwargs, conninfo

if TYPE_CHECKING:
    import procrastinate

# Every job is one run: the task's name, as stored in procrastinate_jobs.task_name.
TASK = "hoplab:run"
# The queue of jobs any bench may take; jobs for some benches only go to a route's queue.
ANY_QUEUE = "hoplab"
# A commit of `hoplab bisect run --fleet` to measure (hoplab.fleet.bisect.jobs): queued
# with allow_unknown, run by a bench's own loop as a run's job is.
MEASURE_COMMIT = "hoplab:measure_commit"


def make_app(db_url: str | None, *, pool_size: int = 1) -> procrastinate.App:
    """An App on the store; opened by the caller (`with app.open():` or open_async). One
    pooled connection is enough for a bench: it fetches, beats and finishes one job at a
    time; LISTEN takes one more of its own."""
    import procrastinate

    connector = procrastinate.PsycopgConnector(
        conninfo=conninfo(db_url), kwargs=connect_kwargs(), min_size=1,
        max_size=max(1, pool_size))
    app = procrastinate.App(connector=connector)
    app.add_tasks_from(_blueprint(), namespace="hoplab")
    return app


def _blueprint() -> procrastinate.Blueprint:
    import procrastinate

    bp = procrastinate.Blueprint()

    # Run by `hoplab worker`'s own loop (hoplab.fleet.queue.worker), never by procrastinate's
    # Worker: the run must own the main thread and its signals.
    @bp.task(name="run")
    def run(**_: Any) -> None:
        raise RuntimeError("a hoplab job is run by `hoplab worker`")

    return bp


def task(app: procrastinate.App) -> Any:
    return app.tasks[TASK]
