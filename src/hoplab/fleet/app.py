"""The procrastinate App on a store's PostgreSQL, and the one task every job is a call of.

The connection is libpq's, from the store URL: the password comes from the URL only if
the user put it there, else from ~/.pgpass or $PGPASSFILE as for every libpq client.
A fleet command on a SQLite store is a UsageError naming PostgreSQL and docs/fleet.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hoplab.errors import UsageError

if TYPE_CHECKING:
    import procrastinate

# Every job is one run: the task's name, as stored in procrastinate_jobs.task_name.
TASK = "hoplab:run"
# The queue of jobs any bench may take; jobs for some benches only go to a route's queue.
ANY_QUEUE = "hoplab"
CONNECT_TIMEOUT_S = 10


def conninfo(db_url: str | None) -> str:
    """libpq's connection string for the PostgreSQL store `db_url` (--db or $HOPLAB_DB)."""
    from hoplab.store.url import parse_location

    location = parse_location(db_url)
    if location.backend != "postgresql":
        raise UsageError(f"the fleet needs a PostgreSQL store (--db postgresql://USER@HOST/DB "
                         f"or $HOPLAB_DB), not {location.description}: see docs/fleet.md")
    url = location.url.set(drivername="postgresql")
    text: str = url.render_as_string(hide_password=False)
    return text


def connect_kwargs(*, read_only: bool = False) -> dict[str, Any]:
    """psycopg.connect's keywords; `read_only`: a session the server refuses any write
    (whoever only reads: the dashboard)."""
    kwargs: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S}
    if read_only:
        kwargs["options"] = "-c default_transaction_read_only=on"
    return kwargs


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

    # Run by `hoplab worker`'s own loop (hoplab.fleet.worker), never by procrastinate's
    # Worker: the run must own the main thread and its signals.
    @bp.task(name="run")
    def run(**_: Any) -> None:
        raise RuntimeError("a hoplab job is run by `hoplab worker`")

    return bp


def task(app: procrastinate.App) -> Any:
    return app.tasks[TASK]
