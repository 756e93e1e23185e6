"""Schedules' judging and alerts on a real PostgreSQL store: a firing whose goodput
halved is judged worse with the figures `hoplab compare` gives, its alert is POSTed to
a real HTTP server (retried after a 500), and a firing like the one before says
nothing."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import statistics

import pytest
from psycopg.rows import dict_row

from hoplab.fleet.queue.db import connect
from hoplab.fleet.schedule import alert_post, alerts
from hoplab.fleet.schedule.judge import judge_firing
from hoplab.fleet.schedule.schedules import save
from hoplab.fleet.schedule.tables import SCHEDULES, Conn
from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.schedule_runs import store_firing
from tests.helpers.webhook import webhook

T0 = dt.datetime(2026, 11, 20, 2, 0, tzinfo=dt.UTC)
BEFORE = [100e6, 101e6, 99e6, 100.5e6, 99.5e6]        # median 100 Mbit/s
HALVED = [50e6, 50.5e6, 49.5e6, 51e6, 49e6]           # median 50 Mbit/s
SAME = [100.2e6, 99.8e6, 100.1e6, 99.9e6, 100e6]


def _schedule(conn: Conn, url: str | None, name: str = "nightly") -> None:
    save(conn, name=name, cron="0 2 * * *", tz="UTC", experiment="wan", source="wan.toml",
         bundle="b" * 64, benches=(), where={}, alert=url,
         dashboard_url="http://lab.example:8080", now=T0)


def test_halved_goodput_is_judged_worse_with_compare_figures(db):
    before = store_firing(db, "e1", BEFORE, started_at=T0.timestamp())
    after = store_firing(db, "e2", HALVED, started_at=T0.timestamp() + 86400)
    with contextlib.closing(open_store(db, read_only=True)) as store:
        verdict = judge_firing(store, "nightly", "e1", "e2")
    (w,) = verdict.worse
    assert (w.experiment, w.test, w.variant, w.metric, w.unit) == \
        ("wan", "bulk", {"hops": 2}, "goodput", "bit/s")
    assert (w.before, w.after, w.change_pct) == (100e6, 50e6, -50.0)
    # 5 against 5 wholly apart: the rank test's smallest two-sided p, 2 / C(10, 5).
    assert w.p == pytest.approx(2 / 252)
    lo, hi = w.ci_pct
    assert -52.0 < lo <= -50.0 <= hi < -48.0
    assert (w.runs_before, w.runs_after) == (tuple(before), tuple(after))
    assert verdict.failed == ()


def test_nothing_changed_nothing_to_say(db):
    store_firing(db, "e1", BEFORE, started_at=T0.timestamp())
    store_firing(db, "e2", SAME, started_at=T0.timestamp() + 86400)
    with contextlib.closing(open_store(db, read_only=True)) as store:
        verdict = judge_firing(store, "nightly", "e1", "e2")
    assert verdict.worse == () and verdict.failed == ()
    assert alerts.firing_document("nightly", verdict, dashboard=None, experiment_id="e2",
                                  previous="e1") is None


def test_alert_is_retried_after_a_500_then_delivered(db):
    before = store_firing(db, "e1", BEFORE, started_at=T0.timestamp())
    after = store_firing(db, "e2", HALVED, started_at=T0.timestamp() + 86400,
                         failed=["iperf3 exited 1: unable to connect"])
    with contextlib.closing(open_store(db, read_only=True)) as store:
        verdict = judge_firing(store, "nightly", "e1", "e2")
    with webhook([500]) as hook, connect(db, tables=[SCHEDULES], row_factory=dict_row) as conn:
        _schedule(conn, hook.url)
        doc = alerts.firing_document("nightly", verdict, dashboard="http://lab.example:8080",
                                     experiment_id="e2", previous="e1")
        assert doc is not None
        with conn.transaction():
            made = alerts.record(conn, key="firing:2", document=doc, has_url=True, now=T0)
            assert alerts.record(conn, key="firing:2", document=doc, has_url=True,
                                 now=T0) is None        # once per firing
        first = alert_post.send_due(db, T0)
        assert [(a.alert, a.state, a.attempts, a.error) for a in first] == \
            [(made, "pending", 1, "HTTP 500 Internal Server Error")]
        # Not again before its backoff is over; then once more, delivered.
        assert alert_post.send_due(db, T0 + dt.timedelta(seconds=29)) == []
        second = alert_post.send_due(db, T0 + dt.timedelta(seconds=30))
        assert [(a.state, a.attempts) for a in second] == [("sent", 2)]
        assert alert_post.send_due(db, T0 + dt.timedelta(hours=1)) == []
        assert hook.answered == [500, 200]
        got = hook.received[-1]
        (listed,) = alerts.alerts(conn)
    assert got["text"].splitlines()[0] == (
        f"nightly: goodput -50.0 % [{got['changes'][0]['ci_pct'][0]:.1f}, "
        f"{got['changes'][0]['ci_pct'][1]:.1f}] worse on wan / bulk hops=2")
    (change,) = got["changes"]
    assert {k: change[k] for k in ("experiment", "test", "variant", "metric", "unit", "before",
                                   "after", "change_pct", "runs_before")} == {
        "experiment": "wan", "test": "bulk", "variant": {"hops": 2}, "metric": "goodput",
        "unit": "bit/s", "before": 100e6, "after": 50e6, "change_pct": -50.0,
        "runs_before": before}
    assert change["runs_after"] == after[:5]
    assert change["p"] == pytest.approx(2 / 252)
    assert change["url"] == ("http://lab.example:8080/compare?a=" + "%2C".join(map(str, before))
                             + "&b=" + "%2C".join(map(str, after[:5])))
    assert got["failed"] == [{"run": after[5], "test": "bulk", "variant": {"hops": 2},
                              "status": "failed", "error": "iperf3 exited 1: unable to connect"}]
    assert (listed.state, listed.attempts, listed.sent_at) == \
        ("sent", 2, T0 + dt.timedelta(seconds=30))
    assert hook.url not in repr(listed.as_json())
    # The dashboard lists it, read-only, with the link to the comparison.
    with contextlib.closing(open_store(db, read_only=True)) as store:
        board = Dashboard(store)
        page, api = board.handle("/alerts"), board.handle("/api/alerts")
    text = page.body.decode()
    assert page.status == 200 and "nightly: goodput -50.0 %" in text
    assert 'href="http://lab.example:8080/compare?a=' in text and "s3cr3t" not in text
    assert [(a["id"], a["state"], a["attempts"]) for a in json.loads(api.body)] == \
        [(made, "sent", 2)]


def test_alert_given_up_after_the_last_backoff(db):
    with webhook([503] * 20) as hook, connect(db, tables=[SCHEDULES], row_factory=dict_row) as conn:
        _schedule(conn, hook.url)
        doc = alerts.gone_document("nightly", "bench1", {"device": "erx"},
                                   T0 - dt.timedelta(minutes=11), T0)
        with conn.transaction():
            alerts.record(conn, key="gone:1", document=doc, has_url=True, now=T0)
        now, states = T0, []
        for wait in (0, *alert_post.BACKOFF_S):
            now += dt.timedelta(seconds=wait)
            states += [a.state for a in alert_post.send_due(db, now)]
        (listed,) = alerts.alerts(conn)
    assert states == ["pending"] * len(alert_post.BACKOFF_S) + ["failed"]
    assert (listed.state, listed.attempts, listed.last_error) == \
        ("failed", len(alert_post.BACKOFF_S) + 1, "HTTP 503 Service Unavailable")
    assert hook.answered == [503] * (len(alert_post.BACKOFF_S) + 1)
    assert listed.text == ("nightly: bench bench1 gone: no heartbeat for 11 min (last "
                           "2026-11-20 01:49 UTC)")


# Three repetitions a firing: too few for the rank test between two firings (its
# smallest p is 0.1), enough for the history's change point over several.
BASE = [100.0, 100.3, 99.8, 100.1, 99.9, 100.2, 99.7, 100.4, 99.6, 100.05, 99.95, 100.15]


def test_a_small_step_is_found_over_the_history_once(db):
    firings = [[v * 1e6 for v in BASE[i:i + 3]] for i in range(0, 12, 3)]
    firings += [[v * 0.96e6 for v in BASE[i:i + 3]] for i in range(0, 9, 3)]
    found, ids = [], [store_firing(db, "e0", firings[0], started_at=T0.timestamp())]
    with contextlib.closing(open_store(db, read_only=True)) as store:
        for i, values in enumerate(firings[1:], 1):
            ids.append(store_firing(db, f"e{i}", values,
                                    started_at=T0.timestamp() + 86400 * i))
            found.append(judge_firing(store, "nightly", f"e{i - 1}", f"e{i}").worse)
    # Seen when the second firing after the step is judged, and only then.
    assert [len(w) for w in found] == [0, 0, 0, 0, 1, 0]
    (w,) = found[4]
    after = [v * 0.96e6 for v in BASE[:6]]
    assert (w.source, w.metric, w.variant, w.runs_before, w.runs_after) == \
        ("step", "goodput", {"hops": 2}, tuple(ids[3]), tuple(ids[4]))
    assert w.before == pytest.approx(statistics.median(BASE) * 1e6, rel=1e-12)
    assert w.after == pytest.approx(statistics.median(after), rel=1e-12)
    assert w.change_pct == pytest.approx(100 * (w.after / w.before - 1), rel=1e-9)
    assert w.ci_pct[0] < w.change_pct < w.ci_pct[1] < 0
