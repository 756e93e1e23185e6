"""The Store: save runs, load them back, list them. SQLite or PostgreSQL."""

from __future__ import annotations

import json
import math
import os
import shlex
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import sqlalchemy as sa

# Each module by its own name, not through the package: hoplab.store's lazy names import
# this module, and the package must not be imported back from here (a cycle).
import hoplab.store.backup as backup
import hoplab.store.budget as budget
import hoplab.store.codec as codec
import hoplab.store.migrations as migrations
from hoplab.errors import HoplabError, UsageError
from hoplab.numbers import MAX_ID, is_run_id
from hoplab.numbers import run_id as parse_run_id
from hoplab.record import (
    DuplicateMetric,
    Metric,
    RawOutput,
    RunRecord,
    Series,
    check_metric_keys,
    upgrade_names,
)
from hoplab.store.labels import label_rows
from hoplab.store.schema import FILTER_COLUMNS, SCHEMA_VERSION, TABLES
from hoplab.store.url import StoreLocation, create_engine, hide_password, parse_location

_IN_CHUNK = 500             # run ids per IN (...) when reading headline metrics
# Filters one query takes at most: each is a subquery, and a thousand of them cost SQLite
# a second of CPU (or exceed its expression depth); no question needs more than a few.
MAX_FILTERS = 32

_RUNS, _METRICS, _SERIES, _RAW = TABLES.runs, TABLES.metrics, TABLES.series, TABLES.raw_outputs
assert TABLES.run_labels is not None and TABLES.annotations is not None
assert TABLES.baselines is not None and TABLES.kept_changes is not None
_LABELS = TABLES.run_labels
_NOTES = TABLES.annotations
_BASES = TABLES.baselines
_KEPT = TABLES.kept_changes


@dataclass(frozen=True)
class Annotation:
    """What a user said happened (`hoplab annotate`): on a label value (key, value:
    version=v45) or at a time (at, Unix seconds)."""

    id: int
    text: str
    created_at: float
    key: str | None = None
    value: str | None = None
    at: float | None = None

    @property
    def where(self) -> str:
        """"version=v45", or the time as local date and time."""
        if self.key is not None:
            return f"{self.key}={self.value}"
        assert self.at is not None
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.at))


@dataclass(frozen=True)
class Baseline:
    """The value a series' latest runs are judged against (`hoplab baseline`): `series`
    and `value` as analysis/changes.py spells them (JSON text), the runs it had when
    pinned, and the selection that pinned it, as typed."""

    id: int
    series: str
    value: str
    runs: tuple[int, ...]
    selection: str
    created_at: float


@dataclass(frozen=True)
class Kept:
    """A series' judged changes as analysis/changes.py keeps them: valid while the series'
    highest run id and number of runs are these and `judge` is the reader's."""

    last_run: int
    runs: int
    judge: str
    changes: str


@dataclass(frozen=True)
class RunSummary:
    """One line of list_runs: a run without its series, raw outputs and detailed metrics."""

    id: int
    experiment: str
    experiment_id: str | None
    test: str
    kind: str
    repetition: int
    status: str
    started_at: float
    duration_s: float
    variant: dict[str, Any]
    labels: dict[str, str]
    metrics: dict[str, float]   # whole-run metrics: flow, node and key all None


def _timed_out(exc: sa.exc.SQLAlchemyError) -> bool:
    """Whether PostgreSQL ended the statement at its statement_timeout (query_canceled,
    SQLSTATE 57014, not by a user's request): under a budget, the one _read set from
    the time left."""
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) == "57014" and "statement timeout" in str(orig)


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return hide_password(text.splitlines()[0] if text else type(exc).__name__)


def _big(n: int) -> sa.BindParameter[int]:
    # As BIGINT: PostgreSQL's id is a 32-bit INTEGER, and a larger number bound as one
    # is an error rather than an id no run has.
    return sa.literal(n, sa.BigInteger)


def _value(value: float | None) -> float:
    return math.nan if value is None else float(value)


_SUMMARY = tuple(c for c in _RUNS.c if c.name not in ("metadata", "error"))


def _filtered(stmt: Any, filters: Mapping[str, str] | None) -> Any:
    """`stmt` restricted to runs matching every filter (see list_runs). UsageError for
    more than MAX_FILTERS filters or an id filter that is not a run id."""
    if filters and len(filters) > MAX_FILTERS:
        raise UsageError(f"{len(filters)} filters: at most {MAX_FILTERS} at once")
    for key, value in (filters or {}).items():
        if key == "id":
            stmt = stmt.where(_RUNS.c.id == _big(parse_run_id(str(value), "filter id")))
        elif key in FILTER_COLUMNS:
            stmt = stmt.where(_RUNS.c[key] == str(value))
        else:
            stmt = stmt.where(_RUNS.c.id.in_(
                sa.select(_LABELS.c.run_id)
                .where(_LABELS.c.key == key, _LABELS.c.value == str(value))))
    return stmt


def _summary(r: sa.RowMapping, figures: dict[str, float]) -> RunSummary:
    return RunSummary(id=r["id"], experiment=r["experiment"], experiment_id=r["experiment_id"],
                      test=r["test"], kind=r["kind"], repetition=r["repetition"],
                      status=r["status"], started_at=r["started_at"],
                      duration_s=r["duration_s"], variant=r["variant"], labels=r["labels"],
                      metrics=figures)


def check_run(run: RunRecord) -> None:
    """UsageError, with the reason, if `run` cannot be stored: a series whose times and
    values differ in number, two metrics of one key, or a variant, labels or metadata
    that is not JSON (NaN included: PostgreSQL's JSON refuses it, so SQLite must too)."""
    for s in run.series:
        if len(s.t) != len(s.v):
            raise UsageError(f"series {s.name}: {len(s.t)} times but {len(s.v)} values")
    try:
        check_metric_keys(run)
    except DuplicateMetric as exc:
        raise UsageError(str(exc)) from None
    for name, value in (("variant", run.variant), ("labels", run.labels),
                        ("metadata", run.metadata or {})):
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{name}: {exc}") from None


@dataclass(frozen=True)
class _Rows:
    """One run's rows, checked and encoded, ready to insert."""

    run: dict[str, Any]
    children: tuple[tuple[sa.Table, list[dict[str, Any]]], ...]
    labels: dict[str, str]
    variant: dict[str, Any]

    @staticmethod
    def of(run: RunRecord) -> _Rows:
        check_run(run)
        meta = run.metadata or {}
        version = meta.get("hoplab_version")
        row = {
            "experiment": run.experiment, "experiment_id": run.experiment_id,
            "test": run.test, "kind": run.kind, "repetition": run.repetition,
            "status": run.status, "error": run.error, "started_at": run.started_at,
            "duration_s": run.duration_s, "seed": run.seed, "run_order": run.order,
            "measurement_version": run.measurement_version,
            "hoplab_version": None if version is None else str(version),
            "variant": run.variant, "labels": run.labels, "metadata": meta,
        }
        series = [
            {"seq": i, "name": s.name, "unit": s.unit, "node": s.node, "flow": s.flow,
             "key": s.key, "n": len(s.t), "t": codec.encode_floats(s.t),
             "v": codec.encode_floats(s.v)}
            for i, s in enumerate(run.series)
        ]
        raw = [
            {"seq": i, "name": r.name, "media_type": r.media_type, "size": len(r.data),
             "data": codec.compress_raw(r.data)}
            for i, r in enumerate(run.raw)
        ]
        metrics = [
            {"seq": i, "name": m.name, "flow": m.flow, "node": m.node, "key": m.key,
             "value": m.value, "unit": m.unit}
            for i, m in enumerate(run.metrics)
        ]
        return _Rows(row, ((_METRICS, metrics), (_SERIES, series), (_RAW, raw)),
                     run.labels, run.variant)

    def insert(self, conn: sa.Connection) -> int:
        key = conn.execute(_RUNS.insert().values(**self.run)).inserted_primary_key
        assert key is not None
        run_id = int(key[0])
        labels = label_rows(run_id, self.labels, self.variant)
        for table, rows in (*self.children, (_LABELS, labels)):
            if rows:
                conn.execute(table.insert(), [{"run_id": run_id, **r} for r in rows])
        return run_id


class Store:
    """Runs in a SQLite file or a PostgreSQL database; open one with open_store()."""

    def __init__(self, location: StoreLocation, *, read_only: bool = False,
                 create: bool = True) -> None:
        self.location = location
        self.read_only = read_only
        self._closed = False
        # The copy of a SQLite file kept before its schema was upgraded, if it was.
        self.backup: Path | None = None
        path = location.url.database if location.backend == "sqlite" else None
        if path and (read_only or not create) and not os.path.exists(path):
            # A command that only reads must not leave an empty store where a typo pointed.
            raise UsageError(f"no store at {location} (no such file; `hoplab run` and "
                             f"`hoplab import` create one)")
        self._engine = create_engine(location, read_only=read_only)
        lock = migrations.no_lock if location.backend == "sqlite" else migrations.pg_lock
        try:
            if not create and not read_only:
                # Looked at read-only first: the writing engine would switch a file that
                # is not a store to WAL (a write) before the refusal.
                _must_be_a_store(location)
            if read_only:
                self.migrated_from = migrations.check(self._engine, _upgrade_hint(location))
            else:
                # The schema version this store had before opening (0: created now).
                self.migrated_from = migrations.migrate(
                    self._engine, lock=lock, create_new=create,
                    backup=self._copy if path else migrations.no_backup)
        except UsageError as exc:
            self._engine.dispose()
            raise UsageError(f"cannot open store {location}: {exc}") from None
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            self._engine.dispose()
            raise UsageError(f"cannot open store {location}: {_reason(exc)}") from None

    def _copy(self, conn: sa.Connection, version: int) -> None:
        assert self.location.url.database
        self.backup = backup.copy(conn, self.location.url.database, version)

    def _fail(self, action: str, exc: BaseException) -> NoReturn:
        raise HoplabError(f"store {self.location}: {action}: {_reason(exc)}") from exc

    @contextmanager
    def _read(self, action: str, *, write: bool = False) -> Iterator[sa.Connection]:
        if self._closed:
            raise HoplabError(f"store {self.location} is closed")
        left = None if write else budget.remaining()
        if left == 0:
            raise budget.TooSlow(f"store {self.location}: {action}: out of time")
        try:
            with self._engine.connect() as conn:
                if left is not None and self.location.backend == "postgresql":
                    # Undone with the transaction when the connection goes back to the pool.
                    # Rounded up: the server's cancel never comes before the budget ends.
                    conn.exec_driver_sql(f"SET statement_timeout = {math.ceil(left * 1000)}")
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            if budget.remaining() == 0 or (left is not None and _timed_out(exc)):
                raise budget.TooSlow(f"store {self.location}: {action}: out of time") from exc
            self._fail(action, exc)

    @contextmanager
    def _write(self, action: str) -> Iterator[sa.Connection]:
        if self.read_only:
            raise HoplabError(f"store {self.location}: {action}: it is open read-only")
        with self._read(action, write=True) as conn:
            conn.execution_options(**{migrations.WRITE: True})
            with conn.begin():
                yield conn

    @property
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    def describe(self) -> str:
        """The store for messages: 'sqlite ./hoplab.db' or a URL without password."""
        return self.location.description

    def save_run(self, run: RunRecord) -> int:
        """Save `run` in one transaction, committed on return; set and return run.id.

        A run that already has an id (loaded from another store) is saved as a new run.
        """
        return self.save_runs([run])[0]

    def save_runs(self, runs: Sequence[RunRecord]) -> list[int]:
        """Save every run in one transaction, committed on return, or none of them; set
        and return their ids. Each is checked (check_run) before any is written."""
        if not runs:
            return []
        prepared = []
        for run in runs:
            try:
                prepared.append(_Rows.of(run))
            except UsageError as exc:
                raise HoplabError(f"store {self.describe()}: cannot save run "
                                  f"{run.experiment}/{run.test}: {exc}") from None
        action = (f"cannot save run {runs[0].experiment}/{runs[0].test}" if len(runs) == 1
                  else f"cannot save {len(runs)} runs (none was saved)")
        # Encoded before the transaction: a SQLite write lock is held for the inserts only.
        with self._write(action) as conn:
            ids = [rows.insert(conn) for rows in prepared]
        for run, run_id in zip(runs, ids, strict=True):
            run.id = run_id
        return ids

    def get_run(self, run_id: int, *, series: bool | frozenset[str] = True,
                raw: bool = False) -> RunRecord:
        """The run saved as `run_id`; without series or raw outputs unless asked (`series`
        a set of names: only those series, e.g. the trials compare judges on)."""
        if not is_run_id(run_id):
            raise UsageError(f"no run {run_id} in {self.describe()}")
        with self._read(f"cannot read run {run_id}") as conn:
            row = conn.execute(sa.select(_RUNS).where(_RUNS.c.id == run_id)).mappings().first()
            if row is None:
                raise UsageError(f"no run {run_id} in {self.describe()}")
            metric_rows = conn.execute(
                sa.select(_METRICS).where(_METRICS.c.run_id == run_id).order_by(_METRICS.c.seq)
            ).mappings().all()
            wanted = sa.select(_SERIES).where(_SERIES.c.run_id == run_id)
            if not isinstance(series, bool):
                wanted = wanted.where(_SERIES.c.name.in_(sorted(series)))
            series_rows = conn.execute(
                wanted.order_by(_SERIES.c.seq)).mappings().all() if series else []
            raw_rows = conn.execute(
                sa.select(_RAW).where(_RAW.c.run_id == run_id).order_by(_RAW.c.seq)
            ).mappings().all() if raw else []
        # A run saved by an older hoplab may carry names since split (docs/data-format.md).
        return upgrade_names(RunRecord(
            experiment=row["experiment"], test=row["test"], kind=row["kind"],
            repetition=row["repetition"], variant=row["variant"], labels=row["labels"],
            started_at=row["started_at"], duration_s=row["duration_s"], status=row["status"],
            error=row["error"], seed=row["seed"], order=row["run_order"],
            experiment_id=row["experiment_id"],
            measurement_version=row["measurement_version"], metadata=row["metadata"],
            metrics=[Metric(name=m["name"], value=_value(m["value"]), unit=m["unit"],
                            flow=m["flow"], node=m["node"], key=m["key"])
                     for m in metric_rows],
            series=[Series(name=s["name"], unit=s["unit"],
                           t=codec.decode_floats(s["t"], s["n"]),
                           v=codec.decode_floats(s["v"], s["n"]),
                           node=s["node"], flow=s["flow"], key=s["key"])
                    for s in series_rows],
            raw=[RawOutput(name=r["name"], data=codec.decompress_raw(r["data"]),
                           media_type=r["media_type"])
                 for r in raw_rows],
            id=row["id"],
        ))

    def raw_output(self, run_id: int, name: str) -> bytes:
        """The raw output `name` of run `run_id`, decompressed."""
        if not is_run_id(run_id):
            raise UsageError(f"no run {run_id} in {self.describe()}")
        with self._read(f"cannot read run {run_id}") as conn:
            blob = conn.execute(
                sa.select(_RAW.c.data)
                .where(_RAW.c.run_id == run_id, _RAW.c.name == name)
                .order_by(_RAW.c.seq).limit(1)
            ).scalar()
            if blob is None:
                known = conn.execute(sa.select(_RUNS.c.id).where(_RUNS.c.id == run_id)).scalar()
        if blob is None:
            if known is None:
                raise UsageError(f"no run {run_id} in {self.describe()}")
            raise UsageError(f"run {run_id} in {self.describe()} has no raw output {name!r}")
        return codec.decompress_raw(blob)

    def list_runs(self, filters: Mapping[str, str] | None = None, *,
                  limit: int | None = None, offset: int = 0,
                  newest: bool = False, figures: bool = True) -> list[RunSummary]:
        """Runs in id order matching every filter: at most `limit`, after skipping `offset`;
        with `newest`, the last `limit` of them (still in id order). Without `figures`,
        the summaries' metrics are left empty (a listing of labels needs none).

        A filter key is a column (id, experiment, experiment_id, test, kind, status),
        else a label or a variant key; values compare as text (hoplab.store.labels).
        """
        if limit is not None and limit < 0:
            raise UsageError(f"limit must be 0 or more, not {limit}")
        if offset < 0:
            raise UsageError(f"offset must be 0 or more, not {offset}")
        stmt = _filtered(sa.select(*_SUMMARY), filters)
        order = _RUNS.c.id.desc() if newest else _RUNS.c.id
        stmt = stmt.order_by(order).offset(offset).limit(limit)
        with self._read("cannot list runs") as conn:
            rows = list(conn.execute(stmt).mappings())
            if newest:
                rows.reverse()
            headline = self._headline(conn, [r["id"] for r in rows]) if figures else {}
        return [_summary(r, headline.get(r["id"], {})) for r in rows]

    def metric_values(self, name: str, filters: Mapping[str, str] | None = None, *,
                      flow: str | None = None, node: str | None = None,
                      key: str | None = None, limit: int | None = None
                      ) -> list[tuple[RunSummary, float]]:
        """Each run matching the filters (as list_runs) that has metric `name` at this
        flow, node and key, with its value, in id order: at most `limit` runs. One query,
        however many runs (`hoplab trend` over thousands); the summaries carry no other
        figure."""
        where = [_METRICS.c.name == name] + [
            _METRICS.c[col].is_(None) if want is None else _METRICS.c[col] == want
            for col, want in (("flow", flow), ("node", node), ("key", key))]
        stmt = _filtered(sa.select(*_SUMMARY, _METRICS.c.value)
                         .join(_METRICS, _METRICS.c.run_id == _RUNS.c.id).where(*where),
                         filters)
        stmt = stmt.order_by(_RUNS.c.id, _METRICS.c.seq)
        out: list[tuple[RunSummary, float]] = []
        with self._read("cannot read metrics") as conn:
            last = None
            for r in conn.execute(stmt).mappings():
                if r["id"] == last:
                    continue            # first one wins, as in RunRecord.metric()
                if limit is not None and len(out) >= limit:
                    break
                last = r["id"]
                out.append((_summary(r, {}), _value(r["value"])))
        return out

    def filter_values(self, key: str, *, limit: int) -> list[str]:
        """Up to `limit` distinct values the filter key `key` takes in this store (a
        column, else a label or variant key, as list_runs matches them); for a message
        that says what a filter could have been."""
        if key == "id":
            return [str(i) for i in self.ids_between(0, MAX_ID, limit=limit)]
        if key in FILTER_COLUMNS:
            col = _RUNS.c[key]
            stmt = sa.select(col).where(col.is_not(None)).distinct().order_by(col).limit(limit)
        else:
            stmt = (sa.select(_LABELS.c.value).where(_LABELS.c.key == key).distinct()
                    .order_by(_LABELS.c.value).limit(limit))
        with self._read("cannot list filter values") as conn:
            return [str(v) for v in conn.execute(stmt).scalars()]

    def label_keys(self, *, limit: int) -> list[str]:
        """Up to `limit` distinct label and variant keys of the stored runs."""
        stmt = sa.select(_LABELS.c.key).distinct().order_by(_LABELS.c.key).limit(limit)
        with self._read("cannot list filter keys") as conn:
            return [str(k) for k in conn.execute(stmt).scalars()]

    def metric_names(self, filters: Mapping[str, str] | None = None, *,
                     runs: int = 1000) -> list[str]:
        """The distinct metric names (any flow, node or key) of the last `runs` runs
        matching `filters`: what a metric could have been named, for a message."""
        ids = _filtered(sa.select(_RUNS.c.id), filters).order_by(_RUNS.c.id.desc()) \
            .limit(runs).subquery()
        stmt = sa.select(_METRICS.c.name).where(
            _METRICS.c.run_id.in_(sa.select(ids.c.id))).distinct()
        with self._read("cannot list metric names") as conn:
            return sorted(str(n) for n in conn.execute(stmt).scalars())

    def runs_with_figures(self, names: Collection[str], *,
                          filters: Mapping[str, str] | None = None, status: str = "ok",
                          after: int = 0) -> list[RunSummary]:
        """Every run of this status matching the filters (as list_runs) with an id above
        `after`, in id order, each with its whole-run figures of these `names` only
        (first one wins, as in list_runs). Two queries however many runs: what the
        dashboard's "what changed" reads of a whole store. The variant and labels are
        read as text and decoded once per distinct text (most runs share them): 100,000
        runs in a third of the time SQLAlchemy's JSON type takes."""
        runs_stmt = _filtered(
            sa.select(*(sa.cast(c, sa.Text).label(c.name) if c.name in ("variant", "labels")
                        else c for c in _SUMMARY))
            .where(_RUNS.c.status == status, _RUNS.c.id > _big(after)), filters)
        figures_stmt = (sa.select(_METRICS.c.run_id, _METRICS.c.name, _METRICS.c.value)
                        .where(_METRICS.c.name.in_(sorted(names)),
                               _METRICS.c.run_id > _big(after), _METRICS.c.flow.is_(None),
                               _METRICS.c.node.is_(None), _METRICS.c.key.is_(None))
                        .order_by(_METRICS.c.run_id, _METRICS.c.seq))
        if filters:
            figures_stmt = figures_stmt.where(_METRICS.c.run_id.in_(
                _filtered(sa.select(_RUNS.c.id).where(_RUNS.c.status == status), filters)))
        figures: dict[int, dict[str, float]] = {}
        decoded: dict[str, Any] = {}

        def load(text: str) -> Any:
            if text not in decoded:
                decoded[text] = json.loads(text)
            return decoded[text]

        with self._read("cannot list runs") as conn:
            rows = list(conn.execute(runs_stmt.order_by(_RUNS.c.id)).mappings())
            if names:
                for run_id, name, value in conn.execute(figures_stmt):
                    figures.setdefault(run_id, {}).setdefault(name, _value(value))
        # Each run its own dicts: a caller may change one without changing the others.
        return [RunSummary(id=r["id"], experiment=r["experiment"],
                           experiment_id=r["experiment_id"], test=r["test"], kind=r["kind"],
                           repetition=r["repetition"], status=r["status"],
                           started_at=r["started_at"], duration_s=r["duration_s"],
                           variant=dict(load(r["variant"])), labels=dict(load(r["labels"])),
                           metrics=figures.get(r["id"], {})) for r in rows]

    def figures_of(self, ids: Collection[int], names: Collection[str]
                   ) -> dict[int, dict[str, float]]:
        """The whole-run figures of these `names` of these runs (first one wins)."""
        wanted, keep = sorted(ids), set(names)
        out: dict[int, dict[str, float]] = {}
        with self._read("cannot read metrics") as conn:
            for start in range(0, len(wanted), _IN_CHUNK):
                # By run id only (the primary key): with a name condition as well, SQLite
                # walks the name index through every run's figures instead (0.45 s a
                # chunk of 100,000 runs', against 0.02 s).
                stmt = (sa.select(_METRICS.c.run_id, _METRICS.c.name, _METRICS.c.value)
                        .where(_METRICS.c.run_id.in_(wanted[start:start + _IN_CHUNK]),
                               _METRICS.c.flow.is_(None), _METRICS.c.node.is_(None),
                               _METRICS.c.key.is_(None))
                        .order_by(_METRICS.c.run_id, _METRICS.c.seq))
                for run_id, name, value in conn.execute(stmt):
                    if name in keep:
                        out.setdefault(run_id, {}).setdefault(name, _value(value))
        return out

    def add_annotation(self, text: str, *, key: str | None = None, value: str | None = None,
                       at: float | None = None) -> int:
        """Store an annotation on a label value (key and value) or at a time; its id."""
        if (key is None) == (at is None) or (key is None) != (value is None):
            raise UsageError("an annotation is on a label value (KEY=VALUE) or at a time, "
                             "one of them")
        if not text.strip():
            raise UsageError("an annotation needs a text")
        row = {"key": key, "value": value, "at": at, "text": text, "created_at": time.time()}
        with self._write("cannot save the annotation") as conn:
            key_ = conn.execute(_NOTES.insert().values(**row)).inserted_primary_key
        assert key_ is not None
        return int(key_[0])

    def annotations(self) -> list[Annotation]:
        """Every annotation, in the order they were made."""
        with self._read("cannot read annotations") as conn:
            rows = conn.execute(sa.select(_NOTES).order_by(_NOTES.c.id)).mappings().all()
        return [Annotation(id=r["id"], text=r["text"], created_at=r["created_at"],
                           key=r["key"], value=r["value"], at=r["at"]) for r in rows]

    def remove_annotation(self, note_id: int) -> Annotation:
        """Delete annotation `note_id` and return it; UsageError if there is none."""
        found = [a for a in self.annotations() if a.id == note_id]
        if not found:
            raise UsageError(f"no annotation {note_id} in {self.describe()} (`hoplab "
                             "annotate --list` lists them)")
        with self._write(f"cannot remove annotation {note_id}") as conn:
            conn.execute(_NOTES.delete().where(_NOTES.c.id == note_id))
        return found[0]

    def pin_baselines(self, pins: Sequence[tuple[str, str, Sequence[int]]],
                      selection: str) -> list[int]:
        """Pin each (series, value, runs) as its series' baseline, replacing the one it
        had, in one transaction; their ids."""
        ids = []
        with self._write("cannot pin the baseline") as conn:
            for series, value, runs in pins:
                conn.execute(_BASES.delete().where(_BASES.c.series == series))
                key = conn.execute(_BASES.insert().values(
                    series=series, value=value, runs=json.dumps(sorted(runs)),
                    selection=selection, created_at=time.time())).inserted_primary_key
                assert key is not None
                ids.append(int(key[0]))
        return ids

    def baselines(self) -> list[Baseline]:
        """Every pinned baseline, in the order they were pinned."""
        with self._read("cannot read baselines") as conn:
            rows = conn.execute(sa.select(_BASES).order_by(_BASES.c.id)).mappings().all()
        return [Baseline(id=r["id"], series=r["series"], value=r["value"],
                         runs=tuple(json.loads(r["runs"])), selection=r["selection"],
                         created_at=r["created_at"]) for r in rows]

    def remove_baseline(self, base_id: int) -> Baseline:
        """Unpin baseline `base_id` (its series is judged against the value before its
        latest again) and return it; UsageError if there is none."""
        found = [b for b in self.baselines() if b.id == base_id]
        if not found:
            raise UsageError(f"no baseline {base_id} in {self.describe()} (`hoplab "
                             "baseline --list` lists them)")
        with self._write(f"cannot remove baseline {base_id}") as conn:
            conn.execute(_BASES.delete().where(_BASES.c.id == base_id))
        return found[0]

    def keep_changes(self, rows: Mapping[str, Kept]) -> None:
        """Keep each series' judged changes, replacing what was kept of it."""
        if not rows:
            return
        now = time.time()
        with self._write("cannot keep the judged changes") as conn:
            conn.execute(_KEPT.delete().where(_KEPT.c.series.in_(sorted(rows))))
            conn.execute(_KEPT.insert(), [
                {"series": k, "last_run": v.last_run, "runs": v.runs, "judge": v.judge,
                 "changes": v.changes, "created_at": now} for k, v in rows.items()])

    def kept_changes(self) -> dict[str, Kept]:
        """Every series' kept judged changes, by series."""
        with self._read("cannot read the judged changes") as conn:
            rows = conn.execute(sa.select(_KEPT)).mappings().all()
        return {r["series"]: Kept(int(r["last_run"]), int(r["runs"]), r["judge"], r["changes"])
                for r in rows}

    def state(self) -> tuple[int, int]:
        """(the highest run id, how many runs): changes whenever a run is added or
        deleted, so a view computed from the runs can be kept until it does."""
        stmt = sa.select(sa.func.max(_RUNS.c.id), sa.func.count()).select_from(_RUNS)
        with self._read("cannot count runs") as conn:
            top, count = conn.execute(stmt).one()
        return int(top or 0), int(count or 0)

    def count_runs(self) -> int:
        """How many runs the store holds."""
        with self._read("cannot count runs") as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(_RUNS)).scalar()
                       or 0)

    def count_ids(self, lo: int, hi: int) -> int:
        """How many runs have an id from `lo` to `hi` (both included)."""
        if lo > min(hi, MAX_ID):
            return 0
        stmt = sa.select(sa.func.count()).select_from(_RUNS).where(
            _RUNS.c.id.between(_big(max(lo, 0)), _big(min(hi, MAX_ID))))
        with self._read("cannot count runs") as conn:
            return int(conn.execute(stmt).scalar() or 0)

    def ids_between(self, lo: int, hi: int, *, limit: int) -> list[int]:
        """The ids of stored runs from `lo` to `hi` (both included), the lowest `limit`."""
        if lo > min(hi, MAX_ID) or limit <= 0:
            return []
        stmt = (sa.select(_RUNS.c.id)
                .where(_RUNS.c.id.between(_big(max(lo, 0)), _big(min(hi, MAX_ID))))
                .order_by(_RUNS.c.id).limit(limit))
        with self._read("cannot list runs") as conn:
            return [int(i) for i in conn.execute(stmt).scalars()]

    @staticmethod
    def _headline(conn: sa.Connection, ids: list[int]) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for start in range(0, len(ids), _IN_CHUNK):
            stmt = (sa.select(_METRICS.c.run_id, _METRICS.c.name, _METRICS.c.value)
                    .where(_METRICS.c.run_id.in_(ids[start:start + _IN_CHUNK]),
                           _METRICS.c.flow.is_(None), _METRICS.c.node.is_(None),
                           _METRICS.c.key.is_(None))
                    .order_by(_METRICS.c.run_id, _METRICS.c.seq))
            for run_id, name, value in conn.execute(stmt):
                # First one wins, as in RunRecord.metric().
                out.setdefault(run_id, {}).setdefault(name, _value(value))
        return out

    def close(self) -> None:
        """Close every connection; the store cannot be used afterwards."""
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Store {self.location}>"


def _must_be_a_store(location: StoreLocation) -> None:
    engine = create_engine(location, read_only=True)
    try:
        with engine.connect() as conn:
            if migrations.read_version(conn) is None:
                raise UsageError(migrations.NOT_A_STORE)
    finally:
        engine.dispose()


def _upgrade_hint(location: StoreLocation) -> str:
    where = (shlex.quote(location.description.removeprefix("sqlite "))
             if location.backend == "sqlite" else location.description)
    return f"hoplab migrate --db {where}"


def open_store(url: str | None = None, *, read_only: bool = False,
               create: bool = True) -> Store:
    """Open (and create or migrate) a store; `read_only`: open it without writing
    anything, refusing a store that is missing, empty or of an older schema; without
    `create`, open it for writing but refuse one that is missing or empty.

    An older SQLite store is copied to NAME.bak-schemaN before it is upgraded (the
    Store's `backup`). None: SQLite ./hoplab.db; a path: SQLite there; sqlite:///PATH,
    postgresql://USER[:PASSWORD]@HOST[:PORT]/DB (or postgres://). UsageError
    naming the store (never its password) if it cannot be opened.
    """
    return Store(parse_location(url), read_only=read_only, create=create)
