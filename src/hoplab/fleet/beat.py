"""A bench's side of the queue, on an event loop of its own thread: procrastinate's
App and its one pooled connection, the worker's heartbeat, the recovery of the jobs of
benches whose heartbeat stopped, and LISTEN for new jobs. The bench's runs own the
main thread (and its signals); they call in here through `call`.

Every `heartbeat_s` a bench beats (procrastinate's worker heartbeat, and its row in
hoplab_fleet_benches), puts back in the queue the jobs of workers silent for
`stale_s` (procrastinate's stalled jobs: their worker's heartbeat is older, or the
worker is gone) and forgets those workers; and reads whether it was asked to drain.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

import procrastinate
from procrastinate import exceptions as pexc

from hoplab.fleet.app import TASK, make_app

T = TypeVar("T")
log = logging.getLogger(__name__)


class Beat:
    def __init__(self, db_url: str | None, bench: str, *, heartbeat_s: float,
                 on_wake: Callable[[], None], on_drain: Callable[[], None]) -> None:
        self.bench = bench
        self.heartbeat_s = heartbeat_s
        self.stale_s = 3 * heartbeat_s
        self.app: procrastinate.App = make_app(db_url)
        self.worker_id: int | None = None
        self._on_wake, self._on_drain = on_wake, on_drain
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="fleet-beat")
        self._tasks: list[asyncio.Task[None]] = []

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
        from hoplab.errors import UsageError

        await self.app.open_async()
        jm = self.app.job_manager
        live = await self.app.connector.execute_query_all_async(
            "SELECT machine, pid FROM hoplab_fleet_benches WHERE name = %(name)s AND state "
            "<> 'stopped' AND now() - heartbeat < 3 * heartbeat_s * interval '1 second'",
            name=self.bench)
        if live:
            raise UsageError(f"bench {self.bench} is already serving (pid {live[0]['pid']} "
                             f"on {live[0]['machine']}): give this one another --bench name")
        await jm.prune_stalled_workers(self.stale_s)
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
            try:
                await self._tick()
            except Exception as e:  # a lost connection: the pool reconnects; beat again
                log.warning("heartbeat failed: %s", e)
            await asyncio.sleep(self.heartbeat_s)

    async def _tick(self) -> None:
        jm = self.app.job_manager
        assert self.worker_id is not None
        await jm.update_heartbeat(self.worker_id)
        rows = await self.app.connector.execute_query_all_async(
            "UPDATE hoplab_fleet_benches SET heartbeat = now() WHERE name = %(name)s "
            "RETURNING state", name=self.bench)
        if rows and rows[0]["state"] == "draining":
            self._on_drain()
        recovered = 0
        for job in await jm.get_stalled_jobs(task_name=TASK,
                                             seconds_since_heartbeat=self.stale_s):
            try:
                await jm.retry_job(job)
                recovered += 1
            except pexc.ProcrastinateException:
                pass  # another bench put it back first, or its worker finished it
        await jm.prune_stalled_workers(self.stale_s)
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
        return self.call(self.app.job_manager.fetch_job(queues=queues,
                                                        worker_id=self.worker_id))

    def finish(self, job_id: int, ok: bool) -> None:
        status = procrastinate.jobs.Status.SUCCEEDED if ok else procrastinate.jobs.Status.FAILED
        self.call(self.app.job_manager.finish_job_by_id_async(job_id, status, False))

    def retry(self, job_id: int) -> None:
        """Back in the queue (an interrupted run): another bench, or this one, runs it."""
        from procrastinate import utils

        self.call(self.app.job_manager.retry_job_by_id_async(job_id, utils.utcnow()))

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
