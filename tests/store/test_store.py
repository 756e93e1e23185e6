from __future__ import annotations

import math
import os
import random
import sqlite3
from pathlib import Path

import pytest

from hoplab.errors import HoplabError, UsageError
from hoplab.record import Metric, RawOutput, RunRecord, Series
from hoplab.store import SCHEMA_VERSION, RunSummary, Store, open_store


def make_run(experiment: str = "wan", test: str = "bulk", *,
             variant: dict[str, object] | None = None, labels: dict[str, str] | None = None,
             status: str = "ok", repetition: int = 1) -> RunRecord:
    return RunRecord(
        experiment=experiment, test=test, kind="tcp", repetition=repetition,
        variant={"hops": 2, "qdisc": "fq_codel", "loss": 0.1} if variant is None else variant,
        labels={"device": "ap1", "firmware": "1.2"} if labels is None else labels,
        started_at=1_763_800_000.123456789, duration_s=10.000000001,
        status=status,  # type: ignore[arg-type]
        error=None if status == "ok" else "iperf3 exited with 1",
        seed=2**40 + 7, order=3, experiment_id="exp-20261122-1",
        metadata={"hoplab_version": "0.1.0", "kernel": "6.1.0", "tools": {"iperf3": "3.12"},
                  "nested": [1, 2.5, None, "x"]},
        metrics=[
            Metric("throughput", 941.123456789, "Mbit/s"),
            Metric("throughput", 470.5, "Mbit/s", flow="f1"),
            Metric("retransmits", 12, "count", flow="f1", node="client"),
            Metric("cpu", 0.25, "ratio", node="r1", key="core0"),
            Metric("rtt_p99", math.inf, "ms"),
        ],
        series=[
            Series("throughput", "Mbit/s", [0.1 * i for i in range(100)],
                   [900 + i / 3 for i in range(100)], flow="f1"),
            Series("rtt", "ms", [0.01 * i for i in range(1000)],
                   [20 + (i % 7) * 0.001 for i in range(1000)], node="client", flow="f1"),
            Series("cpu.softirq", "ratio", [], [], node="r1", key="core0"),
        ],
        raw=[
            RawOutput("iperf3", b'{"end": {"sum_received": {"bits_per_second": 9.4e8}}}',
                      "application/json"),
            RawOutput("ping", bytes(range(256)) * 100),
        ],
    )


def test_round_trip(store: Store) -> None:
    run = make_run()
    run_id = store.save_run(run)
    assert run.id == run_id
    back = store.get_run(run_id, raw=True)
    assert back == run
    assert back.metric("throughput", flow="f1") == 470.5


def test_large_series_round_trip_exactly(store: Store) -> None:
    # Speed at 10^6 samples is measured by bench/store.py; this checks exactness at size.
    rng = random.Random(7)
    n = 200_000
    run = make_run()
    run.series = [Series("rtt", "ms", [i * 0.001 for i in range(n)],
                         [rng.gauss(20.0, 2.0) for _ in range(n)], flow="f1")]
    back = store.get_run(store.save_run(run))
    assert back.series == run.series


def test_get_run_without_series_or_raw(store: Store) -> None:
    run = make_run()
    run_id = store.save_run(run)
    light = store.get_run(run_id, series=False)
    assert light.series == [] and light.raw == []
    assert light.metrics == run.metrics
    assert store.get_run(run_id).series == run.series


def test_nan_metric_reads_back_as_nan(store: Store) -> None:
    run = make_run()
    run.metrics = [Metric("jitter", math.nan, "ms")]
    back = store.get_run(store.save_run(run))
    assert math.isnan(back.metrics[0].value)


def test_ids_grow_and_each_save_is_a_new_run(store: Store) -> None:
    run = make_run()
    first = store.save_run(run)
    second = store.save_run(run)
    assert second > first and run.id == second
    assert [r.id for r in store.list_runs()] == [first, second]


def test_raw_output(store: Store) -> None:
    run = make_run()
    run_id = store.save_run(run)
    assert store.raw_output(run_id, "ping") == bytes(range(256)) * 100
    with pytest.raises(UsageError, match=f"run {run_id} in .* has no raw output 'nope'"):
        store.raw_output(run_id, "nope")
    with pytest.raises(UsageError, match="no run 999 in"):
        store.raw_output(999, "ping")


def test_unknown_run(store: Store) -> None:
    with pytest.raises(UsageError) as info:
        store.get_run(42)
    assert str(info.value) == f"no run 42 in {store.describe()}"
    assert info.value.exit_code == 2


def _save_many(store: Store) -> dict[str, int]:
    ids = {}
    ids["a"] = store.save_run(make_run("wan", "bulk", variant={"hops": 1}))
    ids["b"] = store.save_run(make_run("wan", "bulk", variant={"hops": 2, "ecn": True}))
    ids["c"] = store.save_run(make_run("wan", "rrul", variant={"hops": 2},
                                       labels={"device": "ap2"}, status="failed"))
    ids["d"] = store.save_run(make_run("lan", "bulk", variant={"hops": 2, "device": "x"},
                                       labels={"device": "ap1"}))
    return ids


@pytest.mark.parametrize(("filters", "expected"), [
    (None, "abcd"),
    ({}, "abcd"),
    ({"experiment": "wan"}, "abc"),
    ({"experiment": "wan", "test": "bulk"}, "ab"),
    ({"status": "failed"}, "c"),
    ({"kind": "tcp", "experiment_id": "exp-20261122-1"}, "abcd"),
    ({"hops": "2"}, "bcd"),
    ({"hops": "2", "experiment": "wan"}, "bc"),
    ({"ecn": "true"}, "b"),
    ({"ecn": "True"}, "b"),
    ({"device": "ap2"}, "c"),
    ({"device": "x"}, "d"),           # a variant key of the same name as a label
    ({"device": "ap1", "hops": "1"}, "a"),
    ({"hops": "3"}, ""),
    ({"no_such_key": "1"}, ""),
    ({"experiment": "nope"}, ""),
])
def test_list_runs_filters(store: Store, filters: dict[str, str] | None,
                           expected: str) -> None:
    ids = _save_many(store)
    got = [r.id for r in store.list_runs(filters)]
    assert got == [ids[k] for k in expected]


def test_list_runs_by_id_and_limit(store: Store) -> None:
    ids = _save_many(store)
    assert [r.id for r in store.list_runs({"id": str(ids["c"])})] == [ids["c"]]
    assert [r.id for r in store.list_runs(limit=2)] == [ids["a"], ids["b"]]
    # The limit applies after label and variant filters.
    assert [r.id for r in store.list_runs({"hops": "2"}, limit=2)] == [ids["b"], ids["c"]]
    assert store.list_runs(limit=0) == []
    with pytest.raises(UsageError, match="limit"):
        store.list_runs(limit=-1)
    # A page further on: offset counts matching runs, in SQL or among labels.
    assert [r.id for r in store.list_runs(offset=1, limit=2)] == [ids["b"], ids["c"]]
    assert [r.id for r in store.list_runs({"hops": "2"}, offset=1, limit=1)] == [ids["c"]]
    assert [r.id for r in store.list_runs({"hops": "2"}, offset=2)] == [ids["d"]]
    # An id past any run's (64 bits) or that is no number is refused, naming it
    # (hoplab.numbers: docs/report-and-dashboard.md, "odd values").
    for bad, said in (("99999999999999999999", "at most 9223372036854775807"),
                      ("not a number", "expected a whole number")):
        with pytest.raises(UsageError, match=f"filter id '{bad}': {said}"):
            store.list_runs({"id": bad})
    with pytest.raises(UsageError, match="offset"):
        store.list_runs(offset=-1)


def test_list_runs_newest(store: Store) -> None:
    # `hoplab runs --limit N` shows the last N matching runs, oldest of them first.
    ids = _save_many(store)
    assert [r.id for r in store.list_runs(limit=2, newest=True)] == [ids["c"], ids["d"]]
    assert [r.id for r in store.list_runs({"experiment": "wan"}, limit=2, newest=True)] == [
        ids["b"], ids["c"]]
    assert [r.id for r in store.list_runs({"hops": "2"}, limit=1, newest=True)] == [ids["d"]]
    assert [r.id for r in store.list_runs(newest=True)] == [ids[k] for k in "abcd"]
    # Without figures the summaries carry no metrics (a listing of labels reads none).
    assert store.list_runs(limit=1, figures=False)[0].metrics == {}
    assert store.list_runs(limit=1)[0].metrics != {}


def test_ids_in_a_range_are_counted_in_the_store(store: Store) -> None:
    ids = sorted(_save_many(store).values())
    assert store.count_ids(1, 10**12) == 4
    assert store.count_ids(ids[1], 2**70) == 3        # past 64 bits: no such run, no error
    assert store.count_ids(2**70, 2**71) == 0
    assert store.ids_between(0, 10**12, limit=3) == ids[:3]
    assert store.ids_between(ids[2], ids[2], limit=5) == [ids[2]]


def test_run_summary(store: Store) -> None:
    run = make_run()
    run_id = store.save_run(run)
    (summary,) = store.list_runs()
    assert summary == RunSummary(
        id=run_id, experiment="wan", experiment_id="exp-20261122-1", test="bulk", kind="tcp",
        repetition=1, status="ok", started_at=run.started_at, duration_s=run.duration_s,
        variant=run.variant, labels=run.labels,
        metrics={"throughput": 941.123456789, "rtt_p99": math.inf},
    )


def test_schema_version_and_describe(store: Store, store_url: str) -> None:
    assert store.schema_version == SCHEMA_VERSION
    assert store.migrated_from == 0
    if store_url.startswith("postgresql://"):
        assert store.describe() == store_url
    else:
        assert store.describe() == f"sqlite {store_url}"


def test_closed_store_refuses_work(store_url: str) -> None:
    store = open_store(store_url)
    store.close()
    store.close()
    with pytest.raises(HoplabError, match="is closed"):
        store.list_runs()


# -- SQLite specifics -----------------------------------------------------------

def test_sqlite_default_path_and_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store() as store:
        assert store.describe() == "sqlite ./hoplab.db"
        run_id = store.save_run(make_run())
        # The file stays where it was opened even if the process changes directory.
        os.chdir("/")
        assert store.get_run(run_id).id == run_id
    conn = sqlite3.connect(tmp_path / "hoplab.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_sqlite_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///rel.db") as store:
        assert store.describe() == "sqlite rel.db"
        store.save_run(make_run())
    with open_store(f"sqlite:///{tmp_path}/rel.db") as store:
        assert len(store.list_runs()) == 1


def test_two_sqlite_stores_one_after_the_other(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with open_store(path) as one, open_store(path) as two:
        a = one.save_run(make_run())
        b = two.save_run(make_run(test="rrul"))
        assert [r.id for r in one.list_runs()] == [a, b]
        c = one.save_run(make_run(test="ping"))
        assert two.get_run(c).test == "ping"
    with open_store(path) as again:
        assert [r.test for r in again.list_runs()] == ["bulk", "rrul", "ping"]


def test_sqlite_foreign_keys_are_on(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with open_store(str(path)) as store:
        store.save_run(make_run())
        with store._engine.connect() as conn:  # the pragma is per connection
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


@pytest.mark.parametrize(("field", "value", "message"), [
    ("metadata", {"not json": object()}, "metadata: Object of type object is not JSON"),
    ("variant", {"loss": math.nan}, "variant: Out of range float values"),
])
def test_unsaveable_run_is_refused_whole(store: Store, field: str, value: object,
                                         message: str) -> None:
    run = make_run()
    setattr(run, field, value)
    with pytest.raises(HoplabError, match=f"cannot save run wan/bulk: {message}"):
        store.save_run(run)
    assert run.id is None
    assert store.list_runs() == []


def test_failed_transaction_leaves_nothing(store: Store) -> None:
    run = make_run()
    run.metrics = [Metric(None, 1.0, "ms")]  # type: ignore[arg-type]
    with pytest.raises(HoplabError, match="cannot save run wan/bulk"):
        store.save_run(run)
    assert run.id is None
    assert store.list_runs() == []


# -- errors when opening ---------------------------------------------------------

@pytest.mark.parametrize(("url", "message"), [
    ("mysql://u:secret@db/x", r"bad store URL mysql://u:\*\*\*@db/x: unsupported scheme"),
    ("postgresql://u:secret@127.0.0.1:1", r"bad store URL postgresql://u:\*\*\*@127.0.0.1:1: "
                                          "no database name"),
    ("postgresql://u:secret@127.0.0.1:notaport/db", r"bad store URL postgresql://u:\*\*\*@"),
])
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        open_store(url)
    assert "secret" not in str(info.value)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_unreachable_server(scheme: str) -> None:
    with pytest.raises(UsageError) as info:
        open_store(f"{scheme}://alice:secret@127.0.0.1:1/runs")
    message = str(info.value)
    assert message.startswith("cannot open store postgresql://alice@127.0.0.1:1/runs: ")
    assert "refused" in message
    assert "secret" not in message


def test_unopenable_sqlite_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"cannot open store sqlite {tmp_path}/no/such/dir.db: "
                                         "unable to open database file"):
        open_store(str(tmp_path / "no" / "such" / "dir.db"))


def test_not_a_hoplab_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE runs (x INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(UsageError, match="no schema_version: not a hoplab store"):
        open_store(str(path))
