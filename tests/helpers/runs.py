"""RunRecords with chosen figures, for the compare, select and trend tests, and stores of
real runs (tests/data/render_runs) for the views that must quote their figures."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from hoplab.export import from_json
from hoplab.record import MEASUREMENT_VERSION, Metric, RunRecord
from hoplab.store import open_store

UNITS = {"goodput": "bit/s", "rtt_median": "ms", "loss": "%", "packets": "count",
         "retransmits": "count"}


def make_run(test: str = "bulk", *, kind: str = "tcp", rep: int = 1,
             variant: dict[str, Any] | None = None, labels: dict[str, str] | None = None,
             status: str = "ok", version: str = "0.1.0",
             measurement_version: int = MEASUREMENT_VERSION,
             run_id: int | None = None, started_at: float = 1_763_800_000.0,
             flows: dict[str, float] | None = None, **figures: float) -> RunRecord:
    metrics = [Metric(name, v, UNITS.get(name, "ms")) for name, v in figures.items()]
    metrics += [Metric("goodput", v, "bit/s", flow=f) for f, v in (flows or {}).items()]
    return RunRecord(
        experiment="wan", test=test, kind=kind, repetition=rep,
        variant={} if variant is None else variant,
        labels={} if labels is None else labels, started_at=started_at,
        status=status,  # type: ignore[arg-type]
        measurement_version=measurement_version, metadata={"hoplab_version": version},
        metrics=metrics, id=run_id)


def side(values: list[float], name: str = "goodput", start_id: int = 1,
         **kw: Any) -> list[RunRecord]:
    runs = []
    for i, v in enumerate(values):
        run = make_run(rep=i + 1, run_id=start_id + i, **kw)
        run.metrics.append(Metric(name, v, UNITS.get(name, "ms")))
        runs.append(run)
    return runs


# Real runs, exported by `hoplab export` (tests/data/README.md, "render runs").
REAL_RUNS = Path(__file__).resolve().parents[1] / "data" / "render_runs"


def real_run(name: str) -> RunRecord:
    """A real stored run of tests/data/render_runs (tcp, rrul, ping), without its id."""
    run = from_json(json.loads((REAL_RUNS / f"{name}.json").read_text()))
    run.id = None
    return run


def real_store(path: Path, *names: str) -> list[int]:
    """A SQLite store at `path` holding the real runs `names`, in order; their ids."""
    with open_store(str(path)) as store:
        return [store.save_run(real_run(n)) for n in names]


REPORT_RUNS = Path(__file__).resolve().parents[1] / "data" / "report_runs" / \
    "wireguard-profile.json.gz"


def report_store(path: Path, runs: int = 18) -> list[int]:
    """A SQLite store at `path` of `runs` real 3-second profiled runs: the four of
    tests/data/report_runs (two without WireGuard, two with) taken in turn, each copy
    its own repetition, as `hoplab run examples/wireguard-profile.toml --set
    duration=3s --repeat 9` stores eighteen. Their ids, in order."""
    docs = json.loads(gzip.decompress(REPORT_RUNS.read_bytes()))
    ids = []
    with open_store(str(path)) as store:
        for i in range(runs):
            run = from_json(docs[i % len(docs)])
            run.id = None
            run.repetition = i // len(docs) + 1
            run.started_at += 10.0 * i
            ids.append(store.save_run(run))
    return ids


DEMO_RUNS = Path(__file__).resolve().parents[1] / "data" / "demo_runs" / "demo.json.gz"


def demo_store(path: Path) -> list[int]:
    """A SQLite store at `path` of what `make demo` stores: the sixteen real runs of
    examples/demo.toml in tests/data/demo_runs, in the order they ran (ids 1-16 in a
    new store). Their ids."""
    docs = json.loads(gzip.decompress(DEMO_RUNS.read_bytes()))
    with open_store(str(path)) as store:
        runs = [from_json(d) for d in docs]
        for run in runs:
            run.id = None
        return store.save_runs(runs)
