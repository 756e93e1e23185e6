"""A thread's time budget ends its store reads, mid-statement, on both backends."""

from __future__ import annotations

import time

import pytest

from hoplab.store import Store
from hoplab.store.budget import TooSlow, remaining, time_budget
from hoplab.web import app
from tests.helpers.runs import make_run

# About a minute of work for either backend: longer than any budget below by far.
_SLOW = {"sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                   "WHERE x < 500000000) SELECT count(*) FROM c",
         "postgresql": "SELECT pg_sleep(60)"}


def test_a_slow_read_is_ended_at_the_budget(store: Store) -> None:
    store.save_run(make_run(goodput=1.0))
    t0 = time.monotonic()
    with pytest.raises(TooSlow, match="out of time"), time_budget(0.3), \
            store._read("a slow read") as conn:
        conn.exec_driver_sql(_SLOW[store.location.backend])
    assert 0.25 < time.monotonic() - t0 < 2.0
    assert remaining() is None
    # The budget went with the block: the connection it used reads without one.
    assert len(store.list_runs()) == 1
    with time_budget(5.0):
        assert len(store.list_runs()) == 1


def test_reads_after_the_budget_are_refused(store: Store) -> None:
    store.save_run(make_run(goodput=1.0))
    with time_budget(0.0), pytest.raises(TooSlow):
        store.list_runs()
    store.save_run(make_run(goodput=2.0))         # writes never have a budget
    assert len(store.list_runs()) == 2


def test_the_dashboard_answers_503_past_its_budget(store: Store,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store.save_run(make_run(goodput=1.0))
    dash = app.Dashboard(store)
    assert dash.handle("/api/runs").status == 200
    monkeypatch.setattr(app, "REQUEST_BUDGET_S", 0.0)
    resp = dash.handle("/api/runs")
    assert resp.status == 503
    assert b"took more than 0 s of reading the store" in resp.body
    assert dash.handle("/").status == 503
