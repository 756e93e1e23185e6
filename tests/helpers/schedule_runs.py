"""Stores for the schedule tests: a throwaway PostgreSQL server per test module and
runs stored as a scheduled firing's, with figures the test chooses."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pytest

from hoplab.record import Metric
from hoplab.store import open_store
from tests.helpers.postgres import PgServer, pg_bindir, running
from tests.helpers.runs import make_run


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PgServer]:
    if pg_bindir() is None:
        pytest.skip("PostgreSQL server not installed (no /usr/lib/postgresql/*/bin/initdb): "
                    "run `make setup`")
    with running() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh, empty PostgreSQL store."""
    url = pg_server.fresh_database()
    with contextlib.closing(open_store(url)):
        pass
    return url


def store_firing(url: str, experiment_id: str, goodputs: Sequence[float], *,
                 schedule: str = "nightly", started_at: float, test: str = "bulk",
                 variant: dict[str, object] | None = None,
                 failed: Sequence[str] = ()) -> list[int]:
    """One firing's runs: a repetition per goodput (bit/s), then a failed run per error
    in `failed`; their ids."""
    runs = []
    for i, g in enumerate(goodputs):
        run = make_run(test, rep=i + 1, variant=dict(variant or {"hops": 2}),
                       labels={"schedule": schedule, "bench": f"b{i % 2}"},
                       started_at=started_at + 10 * i)
        run.metrics.append(Metric("goodput", g, "bit/s"))
        runs.append(run)
    for j, error in enumerate(failed):
        run = make_run(test, rep=len(goodputs) + j + 1, variant=dict(variant or {"hops": 2}),
                       labels={"schedule": schedule, "bench": "b0"}, status="failed",
                       started_at=started_at + 10 * (len(goodputs) + j))
        run.error = error
        runs.append(run)
    for r in runs:
        r.experiment_id = experiment_id
    with contextlib.closing(open_store(url)) as store:
        return store.save_runs(runs)
