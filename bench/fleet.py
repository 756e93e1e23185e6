#!/usr/bin/env python3
"""The fleet's queue (procrastinate on PostgreSQL): N benches, each a `hoplab worker`
process (hoplab.fleet.queue.worker's loop, its heartbeat and LISTEN) whose runs are on fake
nodes (hoplab.nodes.fake: the test's clients start nothing and answer a captured ping
output at once), take J short jobs of one submitted experiment from a throwaway
PostgreSQL server; against the same jobs run one after another by `hoplab run`'s loop
(ExperimentRunner.run) on the same fake nodes, storing in the same store. Printed:

  jobs/s        jobs finished per second, from the submit to the last one done
  claim         each claim's latency (the fetch that returned a job), p50 and p99
  connections   PostgreSQL connections each bench held, at most (pg_stat_activity, by
                the application name each bench's process sets)

Targets (issue 20): claim p99 under 100 ms, at least 50 jobs/s with 20 benches, at most
3 connections per bench.

  .venv/bin/python bench/fleet.py                          # 20 benches, 2,000 jobs
  .venv/bin/python bench/fleet.py --benches 8 --jobs 400   # a loaded machine

A third line measures the queue alone: the same benches with jobs that run nothing (every
step of a bench but the run), the ceiling the queue puts on a fleet.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from hoplab.fleet.queue.jobs import BenchRuns, JobArgs  # noqa: E402
from hoplab.lab.build import UpResult  # noqa: E402
from hoplab.lab.plan import plan_lab  # noqa: E402
from hoplab.lab.state import LabState  # noqa: E402
from hoplab.nodes.executor import Executor, Snapshot  # noqa: E402
from hoplab.nodes.fake import FakeExecutor  # noqa: E402
from hoplab.record import RunRecord  # noqa: E402
from hoplab.run.experiment import ExperimentRunner, RunSink  # noqa: E402
from hoplab.spec.experiment import Experiment  # noqa: E402

PING = (ROOT / "tests" / "data" / "ping" / "loopback_v4.txt").read_bytes()
# What the fake nodes' samplers read: this machine's counters, as they are now.
SNAPSHOT = Snapshot(net_dev=Path("/proc/net/dev").read_text(),
                    snmp=Path("/proc/net/snmp").read_text(),
                    netstat=Path("/proc/net/netstat").read_text())
LAB = 'name = "benchfleet"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n'
EXPERIMENT = """lab = "lab.toml"
repeat = {repeat}
pause = "0s"
[matrix]
interval = ["0.2s", "0.5s"]
[[tests]]
name = "p"
kind = "ping"
from = "a"
to = "b"
duration = "0.5s"
"""


class FakeLabRunner(ExperimentRunner):
    """hoplab's runner with its labs on fake nodes: nothing is built, the tests' clients
    answer a captured ping output."""

    def _lab_for(self, index: int) -> tuple[UpResult, dict[str, Any]]:
        if self._up is None or self._up[0] != index:
            plan = plan_lab(self.exp.variants[index].lab)
            nodes: dict[str, Executor] = {}
            for n in plan.nodes:
                fake = FakeExecutor(n.name)
                fake.outputs["ping"] = PING
                fake.snapshots = [SNAPSHOT]
                nodes[n.name] = fake
            self._nodes = nodes
            self._up = (index, UpResult(LabState(name=self.lab_name, source="fake"), plan, 0.0), {})
        return self._up[1], self._up[2]

    def _down(self) -> None:
        self._up = None
        self._nodes = {}


class FakeBenchRuns(BenchRuns):
    def new_runner(self, exp: Experiment) -> ExperimentRunner:
        return FakeLabRunner(exp, self.sink, self.progress, lab_name=self.lab_name)


class EmptyRuns(BenchRuns):
    """The queue alone: a bench's every step but the run (what it measures and stores)."""

    def run(self, job: JobArgs, experiment_labels: Mapping[str, str]) -> RunRecord:
        return RunRecord(experiment="e", test="p", kind="ping", repetition=job.repetition,
                         variant={}, labels={}, started_at=time.time())


def worker(db: str, name: str, out: str, empty: bool) -> int:
    """One bench (a process of its own): serve until SIGTERM, then write its claims."""
    from hoplab.fleet.queue.worker import BenchConfig, BenchWorker
    from hoplab.store import open_store

    config = BenchConfig(name, {}, name, heartbeat_s=10.0, poll_s=2.0)
    with open_store(db) as store:
        runs = (EmptyRuns if empty else FakeBenchRuns)(db, store, name, {}, name)
        bench = BenchWorker(db, config, runs)
        code = bench.serve()
    Path(out).write_text(json.dumps([c.seconds for c in bench.claims]))
    return code


def _count(db: str, sql: str, *args: Any) -> int:
    with psycopg.connect(db) as conn:
        row = conn.execute(sql, args).fetchone()
    return int(row[0]) if row else 0


def _watch_connections(db: str, stop: threading.Event, peak: dict[str, int]) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        while not stop.is_set():
            for app, n in conn.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity WHERE "
                    "application_name LIKE 'bench-w%' GROUP BY application_name").fetchall():
                peak[app] = max(peak.get(app, 0), int(n))
            stop.wait(0.05)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fleet(db: str, exp_path: Path, benches: int, jobs: int, work: Path, *, empty: bool = False
          ) -> dict[str, Any]:
    from hoplab.fleet.queue.db import connect
    from hoplab.fleet.queue.schema import QUEUE
    from hoplab.fleet.queue.submit import enqueue, pack

    connect(db, tables=[QUEUE]).close()
    procs = []
    for i in range(benches):
        env = {**os.environ, "PGAPPNAME": f"bench-w{i}"}
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", db, f"w{i}", str(work / f"w{i}.json"),
             "empty" if empty else "fake"],
            env=env, stdin=subprocess.DEVNULL))
    peak: dict[str, int] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_connections, args=(db, stop, peak))
    try:
        deadline = time.monotonic() + 120
        while _count(db, "SELECT count(*) FROM hoplab_fleet_benches WHERE state = 'idle'"
                     ) < benches:
            if time.monotonic() > deadline:
                raise SystemExit("the benches did not all start in 120 s")
            time.sleep(0.1)
        watcher.start()
        bundle = pack(db, exp_path)
        t0 = time.monotonic()
        experiment_id = enqueue(db, bundle)
        submitted = time.monotonic() - t0
        while _count(db, "SELECT count(*) FROM procrastinate_jobs WHERE status IN "
                         "('todo', 'doing') AND args->>'experiment_id' = %s",
                     experiment_id):
            time.sleep(0.02)
        seconds = time.monotonic() - t0
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join()
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
    claims = [c for i in range(benches) for c in json.loads((work / f"w{i}.json").read_text())]
    ok = _count(db, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded' "
                    "AND args->>'experiment_id' = %s", experiment_id)
    return {"jobs": jobs, "succeeded": ok, "seconds": seconds, "enqueue_s": submitted,
            "jobs_per_s": jobs / seconds, "claims": len(claims),
            "claim_p50_ms": 1000 * statistics.median(claims),
            "claim_p99_ms": 1000 * _pct(claims, 0.99),
            "connections_per_bench": max(peak.values()) if peak else None,
            "benches_seen": len(peak)}


class _Sink:
    def __init__(self, store: RunSink) -> None:
        self.store = store
        self.n = 0

    def save_run(self, run: RunRecord) -> int:
        self.n += 1
        return self.store.save_run(run)


def one_after_another(db: str, exp_path: Path) -> dict[str, Any]:
    """`hoplab run`'s loop (ExperimentRunner.run) over the same jobs, on fake nodes."""
    from hoplab.spec.experiment_loader import load_experiment
    from hoplab.store import open_store

    exp = load_experiment(exp_path)
    with open_store(db) as store:
        sink = _Sink(store)
        t0 = time.monotonic()
        records = FakeLabRunner(exp, sink).run()
        seconds = time.monotonic() - t0
    return {"jobs": len(records), "ok": sum(r.status == "ok" for r in records),
            "seconds": seconds, "jobs_per_s": len(records) / seconds}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benches", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        db, name, out, runs = args.worker
        return worker(db, name, out, runs == "empty")
    from tests.helpers.postgres import running

    repeat = max(1, args.jobs // 2)
    with running(max_connections=max(40, 4 * args.benches + 20)) as server, \
            tempfile.TemporaryDirectory(prefix="hoplab-bench-fleet-") as d:
        work = Path(d)
        (work / "lab.toml").write_text(LAB)
        exp_path = work / "exp.toml"
        exp_path.write_text(EXPERIMENT.format(repeat=repeat))
        base = one_after_another(server.fresh_database(), exp_path)
        got = fleet(server.fresh_database(), exp_path, args.benches, 2 * repeat, work)
        alone = fleet(server.fresh_database(), exp_path, args.benches, 2 * repeat, work,
                      empty=True)
    _print(got, base, alone, args.benches)
    return 0


def _print(got: Mapping[str, Any], base: Mapping[str, Any], alone: Mapping[str, Any],
           benches: int) -> None:
    print(f"\nfleet: {benches} benches, {got['jobs']} jobs ({got['succeeded']} done) in "
          f"{got['seconds']:.1f} s = {got['jobs_per_s']:.1f} jobs/s (target >= 50 with 20 "
          f"benches); queued in {got['enqueue_s']:.2f} s")
    print(f"  claim latency p50 {got['claim_p50_ms']:.1f} ms, p99 {got['claim_p99_ms']:.1f} ms "
          f"over {got['claims']} claims (target p99 < 100 ms)")
    print(f"  PostgreSQL connections per bench, at most: {got['connections_per_bench']} "
          f"(seen for {got['benches_seen']} benches; target <= 3)")
    print(f"hoplab run's loop, one after another: {base['jobs']} jobs ({base['ok']} ok) in "
          f"{base['seconds']:.1f} s = {base['jobs_per_s']:.1f} jobs/s")
    print(f"the queue alone (jobs that run nothing): {alone['jobs_per_s']:.1f} jobs/s, claim "
          f"p50 {alone['claim_p50_ms']:.1f} ms, p99 {alone['claim_p99_ms']:.1f} ms, "
          f"{alone['connections_per_bench']} connections per bench")
    print(json.dumps({"fleet": got, "one_after_another": base, "queue_alone": alone}))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
