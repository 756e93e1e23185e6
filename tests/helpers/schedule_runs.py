"""Runs stored as a scheduled firing's, with figures the test chooses, and its jobs
finished as a bench finishes them."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from hoplab.record import Metric
from hoplab.store import open_store
from tests.helpers.runs import make_run


def store_firing(url: str, experiment_id: str, goodputs: Sequence[float], *,
                 schedule: str = "nightly", started_at: float, test: str = "bulk",
                 variant: dict[str, object] | None = None,
                 failed: Sequence[str] = ()) -> list[int]:
    """One firing's runs: a repetition per goodput (bit/s), then a failed run per error
    in `failed`; their ids."""
    runs = []
    for i, g in enumerate(goodputs):
        run = make_run(test, rep=i + 1, variant=dict({"hops": 2} if variant is None else variant),
                       labels={"schedule": schedule, "bench": f"b{i % 2}"},
                       started_at=started_at + 10 * i)
        run.metrics.append(Metric("goodput", g, "bit/s"))
        runs.append(run)
    for j, error in enumerate(failed):
        run = make_run(test, rep=len(goodputs) + j + 1,
                       variant=dict({"hops": 2} if variant is None else variant),
                       labels={"schedule": schedule, "bench": "b0"}, status="failed",
                       started_at=started_at + 10 * (len(goodputs) + j))
        run.error = error
        runs.append(run)
    for r in runs:
        r.experiment_id = experiment_id
    with contextlib.closing(open_store(url)) as store:
        return store.save_runs(runs)


def finish_jobs(url: str, experiment_id: str) -> int:
    """Take and finish every queued job of the experiment as a bench does (procrastinate's
    fetch and finish, as fleet/queue/beat.py calls them), its runs being stored by the test;
    how many."""
    import asyncio

    from procrastinate.jobs import Status

    from hoplab.fleet.queue.app import make_app

    async def finish() -> int:
        app = make_app(url)
        done = 0
        async with app.open_async():
            jm = app.job_manager
            worker = await jm.register_worker()
            while (job := await jm.fetch_job(queues=None, worker_id=worker)) is not None:
                assert job.id is not None and job.task_kwargs["experiment_id"] == experiment_id
                await jm.finish_job_by_id_async(job.id, Status.SUCCEEDED, False)
                done += 1
            await jm.unregister_worker(worker)
        return done

    return asyncio.run(finish())
