"""`hoplab worker --db URL --bench NAME`: this machine as a bench of the fleet."""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import TYPE_CHECKING

from hoplab.cli import store_arg

if TYPE_CHECKING:
    from hoplab.record import RunRecord
    from hoplab.run.experiment import Progress


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("worker", help="take runs of submitted experiments from the fleet's "
                                      "queue (a bench)",
                       description="Serve as bench NAME: take one job (one run of a submitted "
                                   "experiment) at a time from the queue in the PostgreSQL "
                                   "store, run it and store it labelled bench=NAME. SIGTERM "
                                   "finishes the current run and exits 0; Ctrl-C or a second "
                                   "signal interrupts it (its job goes back to the queue). "
                                   "See docs/fleet.md.")
    store_arg.add(p)
    p.add_argument("--bench", required=True, help="this bench's name (unique in the fleet)")
    p.add_argument("--label", dest="labels", action="append", default=[],
                   metavar="KEY=VALUE", help="a label of this bench (device=erx); jobs "
                                             "submitted --where KEY=VALUE need it")
    p.add_argument("--lab-name", help="name of the bench's lab (default: from the bench's "
                                      "name); `hoplab clean NAME` removes it after a crash")
    p.add_argument("--bench-file", metavar="FILE",
                   help="this bench's own facts: what the lab files' nodes and links are "
                        "here (device addresses, NICs); see docs/fleet.md")
    p.add_argument("--concurrency", type=int, default=1, metavar="N",
                   help="run N jobs at once, each in a worker process of its own with its "
                        "own lab (default 1)")
    p.add_argument("--slot", type=int, help=argparse.SUPPRESS)
    p.add_argument("--heartbeat", type=float, default=10.0, metavar="SECONDS",
                   help="heartbeat interval; a bench silent for 3 of them is gone and its "
                        "job runs again elsewhere (default 10)")
    p.add_argument("--lock-timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="how long a job waits for a device another run holds; then the job "
                        "fails, naming the holder (default 3600)")
    p.set_defaults(func=run, needs_root=True)


def bench_lab_name(bench: str) -> str:
    """The bench's own lab name: its name if that is a valid lab name, else one made from
    it, so two benches on one machine never share a lab."""
    from hoplab.spec.names import lab_name

    try:
        return lab_name(bench)
    except ValueError:
        return "b" + hashlib.sha256(bench.encode()).hexdigest()[:10]


def _progress() -> Progress:
    """A line on stderr per run stored (a bench's journal)."""
    from hoplab import kv
    from hoplab.run.experiment import Progress

    def end_run(rec: RunRecord) -> None:
        said = f": {rec.error}" if rec.error else ""
        print(f"hoplab: run {rec.id} ({rec.experiment} {rec.test} {kv.pairs(rec.variant)} "
              f"rep {rec.repetition}, experiment {rec.experiment_id}) {rec.status}{said}",
              file=sys.stderr, flush=True)

    def note(message: str) -> None:
        if message.startswith("warning"):
            print(f"hoplab: {message}", file=sys.stderr, flush=True)

    return Progress(end_run=end_run, note=note)


def _workers(args: argparse.Namespace, db: str | None, lab: str) -> int:
    """--concurrency N: N workers of this bench, each a process with its own lab."""
    import os

    from hoplab.fleet.queue.slots import supervise

    argv = [sys.executable, "-m", "hoplab.cli.main", "worker", "--bench", args.bench,
            "--lab-name", lab, "--heartbeat", str(args.heartbeat),
            "--lock-timeout", str(args.lock_timeout)]
    for label in args.labels:
        argv += ["--label", label]
    if args.bench_file:
        argv += ["--bench-file", os.path.abspath(args.bench_file)]
    # The store by the environment, never on a command line (`ps` shows those).
    env = {**os.environ, **({"HOPLAB_DB": db} if db else {})}
    return supervise(argv, args.concurrency, env)


def run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from hoplab import kv
    from hoplab.errors import UsageError
    from hoplab.fleet.bisect.jobs import RESULTS, serve_job
    from hoplab.fleet.bisect.jobs import TASK as MEASURE_COMMIT
    from hoplab.fleet.queue import benchfile
    from hoplab.fleet.queue.db import connect, conninfo
    from hoplab.fleet.queue.jobs import BenchRuns
    from hoplab.fleet.queue.schema import QUEUE
    from hoplab.fleet.queue.slots import slot_lab
    from hoplab.fleet.queue.worker import BenchConfig, BenchWorker, describe
    from hoplab.spec.names import given, lab_name
    from hoplab.store import open_store

    store_arg.no_password_in_argv(args, "worker")
    db = store_arg.url(args)
    conninfo(db)  # a SQLite store is refused before anything else
    # Not inherited by what the jobs start (their setup commands, the tools): they have
    # no use of the store. (They run as root: see docs/fleet.md#credentials.)
    os.environ.pop(store_arg.ENV, None)
    if not args.bench.strip():
        raise UsageError("--bench: give the bench a name")
    if args.heartbeat <= 0:
        raise UsageError(f"--heartbeat {args.heartbeat:g}: must be more than 0 s")
    labels = kv.parse(args.labels, "--label", "--label device=erx")
    if "bench" in labels:
        raise UsageError("--label bench=...: `bench` is the bench's name (--bench)")
    sets = benchfile.read(Path(args.bench_file)) if args.bench_file else []
    if args.lock_timeout <= 0:
        raise UsageError(f"--lock-timeout {args.lock_timeout:g}: must be more than 0 s")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency {args.concurrency}: must be 1 or more")
    lab = given(lab_name, args.lab_name, "worker --lab-name") if args.lab_name \
        else bench_lab_name(args.bench)
    # Reachable, and the tables made: the queue's, and the answers of the commit jobs
    # this bench serves (their driver makes them too, but a job may outlive it).
    connect(db, tables=[QUEUE, RESULTS]).close()
    if args.concurrency > 1:
        return _workers(args, db, lab)
    if args.slot is not None:
        lab = slot_lab(lab, args.slot)
    config = BenchConfig(args.bench, labels, lab, heartbeat_s=args.heartbeat, slot=args.slot)
    with open_store(db) as store:
        store_arg.said_upgraded(store)
        runs = BenchRuns(db, store, args.bench, labels, lab, _progress(), sets)
        runs.lock_timeout_s = args.lock_timeout
        print(f"hoplab: {describe(config)} serving {store.describe()}", file=sys.stderr,
              flush=True)
        worker = BenchWorker(db, config, runs, tasks={MEASURE_COMMIT: serve_job})
        code = worker.serve()
    why = "" if not code else " (interrupted; its lab is left)" if worker.lab_left else \
        " (interrupted; its job is back in the queue)"
    print(f"hoplab: bench {config.row} stopped{why}", file=sys.stderr)
    return code
