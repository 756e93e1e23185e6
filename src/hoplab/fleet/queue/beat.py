"""A bench's side of the queue, on an event loop of its own thread: procrastinate's
App and its one pooled connection, the worker's heartbeat, the recovery of the jobs of
benches whose heartbeat stopped, and LISTEN for new jobs. The bench's runs own the
main thread (and its signals); they call in here through `call`.

Every `heartbeat_s` a bench beats (procrastinate's worker heartbeat, and its row in
hoplab_fleet_benches), puts back in the queue every job, whatever its task, whose
worker is silent for 3 of that worker's own heartbeats (or is gone), notes the handover
in hoplab_fleet_handovers and forgets those workers; and reads whether it was asked to
drain. A bench that heard a stop signal says `draining` at once (`draining`), so that
`hoplab fleet`, and a test about to send a second signal, can see the first was noted.

Each job is taken with its attempt (procrastinate's `attempts`, raised each time the job
goes back to the queue): the fencing token. A bench marks a job done, or puts it back,
only while that attempt is still the job's; a bench that was silent (frozen, cut off)
and lives on finds its job handed on, and leaves it alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

import procrastinate

from hoplab.errors import UsageError
from hoplab.fleet.queue.app import make_app
from hoplab.fleet.queue.schema import ONE_OK_RUN

T = TypeVar("T")
log = logging.getLogger(__name__)

# A worker that is no bench (`hoplab schedule serve`'s procrastinate Worker) beats every
# 10 s (procrastinate's default); a bench's heartbeat is in hoplab_fleet_benches.
_OTHER_HEARTBEAT_S = 10.0
_WINDOW = ("3 * coalesce((SELECT max(b.heartbeat_s) FROM hoplab_fleet_benches b WHERE "
           "b.worker_id = w.id), %(other)s) * interval '1 second'")
# Every job under way whose worker is silent for 3 of its own heartbeats, or gone; with
# the bench that had it (its current job), if one says so.
_STALLED = (
    "SELECT j.id, j.attempts, (SELECT b.name FROM hoplab_fleet_benches b WHERE "
    "b.current_job = j.id ORDER BY b.heartbeat DESC LIMIT 1) AS bench FROM "
    "procrastinate_jobs j LEFT JOIN procrastinate_workers w ON w.id = j.worker_id WHERE "
    f"j.status = 'doing' AND (w.id IS NULL OR w.last_heartbeat < now() - {_WINDOW})")
_PRUNE = f"DELETE FROM procrastinate_workers w WHERE w.last_heartbeat < now() - {_WINDOW}"
# The job, if `attempt` is still its attempt under way (the fencing check); locked.
CURRENT_JOB = ("SELECT id FROM procrastinate_jobs WHERE id = %(id)s AND status = 'doing' "
               "AND attempts = %(attempt)s")
_CURRENT = f"{CURRENT_JOB} FOR UPDATE"
_RETRY = ("SELECT procrastinate_retry_job_v2(j.id, now(), NULL::integer, NULL::varchar, "
          f"NULL::varchar) FROM ({_CURRENT}) j")
_FINISH = ("SELECT procrastinate_finish_job_v1(j.id, %(status)s::procrastinate_job_status, "
           f"false) FROM ({_CURRENT}) j")


class Beat:
    def __init__(self, db_url: str | None, bench: str, *, heartbeat_s: float,
                 on_wake: Callable[[], None], on_drain: Callable[[], None],
                 on_cancel: Callable[[int], None] = lambda _job: None) -> None:
        self.bench = bench
        self.heartbeat_s = heartbeat_s
        self.stale_s = 3 * heartbeat_s
        self.app: procrastinate.App = make_app(db_url)
        self.worker_id: int | None = None
        # Each job taken, its attempt: the fencing token.
        self.attempts: dict[int, int] = {}
        self._on_wake, self._on_drain, self._on_cancel = on_wake, on_drain, on_cancel
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="fleet-beat")
        self._tasks: list[asyncio.Task[None]] = []
        # Told to stop after its run (a signal, or drain): said in its row by the beat,
        # which `_nudge` brings forward rather than a heartbeat later.
        self._draining = False
        self._nudge = asyncio.Event()

    def draining(self) -> None:
        """The bench stops after its run: its row says `draining` (the next beat, now).
        Called in a signal handler too, so it only sets a flag and wakes the loop."""
        if self._draining:
            return
        self._draining = True
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._nudge.set)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the beat's loop and wait for its answer."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def query(self, sql: str, **args: Any) -> list[dict[str, Any]]:
        return self.call(self.app.connector.execute_query_all_async(sql, **args))

    def execute(self, sql: str, **args: Any) -> None:
        self.call(self.app.connector.execute_query_async(sql, **args))

    def start(self, labels: Mapping[str, str], machine: str, pid: int) -> None:
        self._thread.start()
        self.call(self._start(dict(labels), machine, pid))

    async def _start(self, labels: dict[str, str], machine: str, pid: int) -> None:
        await self.app.open_async()
        jm = self.app.job_manager
        live = await self.app.connector.execute_query_all_async(
            "SELECT machine, pid FROM hoplab_fleet_benches WHERE name = %(name)s AND state "
            "<> 'stopped' AND now() - heartbeat < 3 * heartbeat_s * interval '1 second'",
            name=self.bench)
        if live:
            raise UsageError(f"bench {self.bench} is already serving (pid {live[0]['pid']} "
                             f"on {live[0]['machine']}): give this one another --bench name")
        await self.app.connector.execute_query_async(_PRUNE, other=_OTHER_HEARTBEAT_S)
        await self.app.connector.execute_query_async(ONE_OK_RUN)
        self.worker_id = await jm.register_worker()
        await self.app.connector.execute_query_async(
            "INSERT INTO hoplab_fleet_benches (name, labels, machine, pid, worker_id, state, "
            "heartbeat_s) VALUES (%(name)s, %(labels)s::jsonb, %(machine)s, %(pid)s, "
            "%(worker)s, 'idle', %(beat)s) ON CONFLICT (name) DO UPDATE SET labels = "
            "EXCLUDED.labels, machine = EXCLUDED.machine, pid = EXCLUDED.pid, worker_id = "
            "EXCLUDED.worker_id, state = 'idle', heartbeat = now(), heartbeat_s = "
            "EXCLUDED.heartbeat_s, current_job = NULL, started_at = now()",
            name=self.bench, labels=json.dumps(labels), machine=machine, pid=pid,
            worker=self.worker_id, beat=self.heartbeat_s)
        self._tasks = [asyncio.create_task(self._beat()), asyncio.create_task(self._listen())]

    async def _beat(self) -> None:
        while True:
            self._nudge.clear()  # before the tick: a nudge during it is not lost
            try:
                await self._tick()
            except Exception as e:  # a lost connection: the pool reconnects; beat again
                log.warning("heartbeat failed: %s", e)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nudge.wait(), self.heartbeat_s)

    async def _tick(self) -> None:
        db = self.app.connector
        assert self.worker_id is not None
        beat = await db.execute_query_all_async(
            "UPDATE procrastinate_workers SET last_heartbeat = now() WHERE id = %(id)s "
            "RETURNING id", id=self.worker_id)
        if not beat:  # silent too long (frozen, cut off): forgotten by the others
            self.worker_id = await self.app.job_manager.register_worker()
        rows = await db.execute_query_all_async(
            "UPDATE hoplab_fleet_benches SET heartbeat = now(), worker_id = %(worker)s, "
            "state = CASE WHEN %(draining)s THEN 'draining' ELSE state END WHERE name = "
            "%(name)s RETURNING state", name=self.bench, worker=self.worker_id,
            draining=self._draining)
        if rows and rows[0]["state"] == "draining":
            self._on_drain()
        # `hoplab fleet cancel` asks a job under way to stop (procrastinate's abort).
        for job in await db.execute_query_all_async(
                "SELECT id FROM procrastinate_jobs WHERE id = ANY(%(ids)s) AND status = "
                "'doing' AND abort_requested", ids=list(self.attempts)):
            self._on_cancel(int(job["id"]))
        recovered = 0
        for job in await db.execute_query_all_async(_STALLED, other=_OTHER_HEARTBEAT_S):
            if await db.execute_query_all_async(_RETRY, id=job["id"],
                                                attempt=job["attempts"]):
                await db.execute_query_async(
                    "INSERT INTO hoplab_fleet_handovers (job_id, attempt, bench, by_bench) "
                    "VALUES (%(id)s, %(attempt)s, %(bench)s, %(by)s)", id=job["id"],
                    attempt=job["attempts"], bench=job["bench"], by=self.bench)
                recovered += 1
        await db.execute_query_async(_PRUNE, other=_OTHER_HEARTBEAT_S)
        if recovered:
            self._on_wake()

    async def _listen(self) -> None:
        async def notified(*, channel: str, notification: Any) -> None:
            self._on_wake()

        while True:
            try:
                await self.app.job_manager.listen_for_jobs(on_notification=notified)
            except Exception as e:  # polling still finds the jobs; listen again
                log.warning("listening for jobs failed: %s", e)
            await asyncio.sleep(self.heartbeat_s)

    def fetch(self, queues: list[str]) -> procrastinate.jobs.Job | None:
        assert self.worker_id is not None
        job = self.call(self.app.job_manager.fetch_job(queues=queues,
                                                       worker_id=self.worker_id))
        if job is not None and job.id is not None:
            self.attempts[job.id] = job.attempts
        return job

    def finish(self, job_id: int, ok: bool) -> bool:
        """The job done, if this bench's attempt is still its own; whether it was."""
        status = procrastinate.jobs.Status.SUCCEEDED if ok else procrastinate.jobs.Status.FAILED
        return self.end(job_id, status.value)

    def end(self, job_id: int, status: str) -> bool:
        """As finish, with any of procrastinate's end states (succeeded, failed, aborted)."""
        done = bool(self.query(_FINISH, id=job_id, status=status,
                               attempt=self.attempts.pop(job_id, -1)))
        if not done:
            log.warning("job %s was handed to another bench while this one was silent; "
                        "its end is that bench's", job_id)
        return done

    def retry(self, job_id: int) -> None:
        """Back in the queue (an interrupted run): another bench, or this one, runs it."""
        self.query(_RETRY, id=job_id, attempt=self.attempts.pop(job_id, -1))

    def stop(self) -> None:
        """Unregister the worker, say the bench stopped, close the pool and the loop."""
        if self._thread.is_alive():
            try:
                self.call(self._stop())
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=10)
                if not self._thread.is_alive():
                    self._loop.close()

    async def _stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            if self.worker_id is not None:
                await self.app.job_manager.unregister_worker(self.worker_id)
            await self.app.connector.execute_query_async(
                "UPDATE hoplab_fleet_benches SET state = 'stopped', current_job = NULL, "
                "heartbeat = now() WHERE name = %(name)s", name=self.bench)
        finally:
            await self.app.close_async()
