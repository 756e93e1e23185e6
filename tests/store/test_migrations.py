from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from hoplab.errors import UsageError
from hoplab.record import Metric, RawOutput, RunRecord, Series
from hoplab.store import SCHEMA_VERSION, migrations, open_store, schema
from hoplab.store.codec import compress_raw, encode_floats
from hoplab.store.url import create_engine, parse_location


@pytest.fixture
def engine(store_url: str) -> Iterator[sa.Engine]:
    """An engine on the empty store, for building old schemas by hand."""
    eng = create_engine(parse_location(store_url))
    yield eng
    eng.dispose()


def _version(engine: sa.Engine) -> int | None:
    with engine.connect() as conn:
        return migrations.read_version(conn)


def _insert_v1_run(conn: sa.Connection) -> int:
    """A run as hoplab with schema 1 wrote it."""
    v1 = schema.build(1)
    result = conn.execute(v1.runs.insert().values(
        experiment="wan", experiment_id="e1", test="bulk", kind="tcp", repetition=2,
        status="ok", error=None, started_at=1.5e9, duration_s=10.0, seed=7, run_order=0,
        measurement_version=1, variant={"hops": 2}, labels={"device": "ap1"},
        metadata={"hoplab_version": "0.0.9", "kernel": "6.1"},
    ))
    key = result.inserted_primary_key
    assert key is not None
    run_id = int(key[0])
    conn.execute(v1.metrics.insert().values(run_id=run_id, seq=0, name="throughput",
                                            flow=None, node=None, key=None, value=941.0,
                                            unit="Mbit/s"))
    conn.execute(v1.series.insert().values(run_id=run_id, seq=0, name="rtt", unit="ms",
                                           node="client", flow=None, key=None, n=3,
                                           t=encode_floats([0.0, 1.0, 2.0]),
                                           v=encode_floats([20.0, 21.5, 19.25])))
    conn.execute(v1.raw_outputs.insert().values(run_id=run_id, seq=0, name="ping",
                                                media_type="text/plain", size=5,
                                                data=compress_raw(b"hello")))
    return run_id


def test_v1_store_is_migrated_on_open(engine: sa.Engine, store_url: str) -> None:
    with engine.begin() as conn:
        migrations.create(conn, version=1)
        run_id = _insert_v1_run(conn)
    assert _version(engine) == 1
    assert "hoplab_version" not in {c["name"] for c in sa.inspect(engine).get_columns("runs")}

    with open_store(store_url) as store:
        assert store.migrated_from == 1
        assert store.schema_version == SCHEMA_VERSION == 6
        run = store.get_run(run_id, raw=True)
    assert run == RunRecord(
        experiment="wan", test="bulk", kind="tcp", repetition=2, variant={"hops": 2},
        labels={"device": "ap1"}, started_at=1.5e9, duration_s=10.0, seed=7, order=0,
        experiment_id="e1", measurement_version=1,
        metadata={"hoplab_version": "0.0.9", "kernel": "6.1"},
        metrics=[Metric("throughput", 941.0, "Mbit/s")],
        series=[Series("rtt", "ms", [0.0, 1.0, 2.0], [20.0, 21.5, 19.25], node="client")],
        raw=[RawOutput("ping", b"hello")], id=run_id,
    )

    inspector = sa.inspect(engine)
    assert "ix_runs_experiment_test" in {i["name"] for i in inspector.get_indexes("runs")}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT hoplab_version FROM runs")).scalar() == "0.0.9"
        versions = conn.execute(sa.text("SELECT version FROM schema_version ORDER BY version"))
        assert versions.scalars().all() == [1, 2, 3, 4, 5, 6]

    # Opened again: nothing left to do.
    with open_store(store_url) as store:
        assert store.migrated_from == SCHEMA_VERSION
        assert [r.id for r in store.list_runs({"device": "ap1"})] == [run_id]
        # The v1 run's labels and variant were indexed by the step to version 3.
        assert [r.id for r in store.list_runs({"hops": "2"})] == [run_id]
        assert store.list_runs({"hops": "3"}) == []
        assert store.annotations() == []              # the table of version 4
        assert store.baselines() == []                # the table of version 5
        assert store.kept_changes() == {}             # the table of version 6


def test_failed_migration_leaves_the_store_as_it_was(
        engine: sa.Engine, store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with engine.begin() as conn:
        migrations.create(conn, version=1)
        _insert_v1_run(conn)

    def broken(conn: sa.Connection) -> None:
        conn.execute(sa.text("ALTER TABLE runs ADD COLUMN hoplab_version VARCHAR"))
        raise sa.exc.OperationalError("step 2", {}, Exception("disk on fire"))

    monkeypatch.setitem(migrations.MIGRATIONS, 1, broken)
    with pytest.raises(UsageError, match=r"cannot open store .*: disk on fire"):
        open_store(store_url)
    # The DDL was rolled back with the rest (SQLite too: the store emits BEGIN itself).
    assert _version(engine) == 1
    assert "hoplab_version" not in {c["name"] for c in sa.inspect(engine).get_columns("runs")}

    monkeypatch.undo()
    with open_store(store_url) as store:
        assert store.migrated_from == 1
        assert len(store.list_runs()) == 1


def test_newer_store_is_refused(engine: sa.Engine, store_url: str) -> None:
    with open_store(store_url):
        pass
    with engine.begin() as conn:
        conn.execute(schema.TABLES.schema_version.insert().values(
            version=SCHEMA_VERSION + 5, applied_at=0.0))
    with pytest.raises(UsageError) as info:
        open_store(store_url)
    assert str(info.value).endswith(
        f"it was created by a newer hoplab (schema {SCHEMA_VERSION + 5}); "
        f"this hoplab reads up to {SCHEMA_VERSION}")
    assert info.value.exit_code == 2


def test_concurrent_opens_create_the_schema_once(engine: sa.Engine, store_url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def open_one() -> None:
        try:
            barrier.wait()
            open_store(store_url).close()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _version(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM schema_version")).scalar() == 1


def test_every_version_has_a_step() -> None:
    assert sorted(migrations.MIGRATIONS) == list(range(1, SCHEMA_VERSION))
    with pytest.raises(ValueError, match="no schema version"):
        schema.build(SCHEMA_VERSION + 1)
