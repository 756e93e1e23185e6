"""`hoplab submit EXPERIMENT.toml --db URL`: queue an experiment's runs for the fleet."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING

from hoplab.cli import store_arg

if TYPE_CHECKING:
    from hoplab.record import RunRecord
    from hoplab.store import Store

# How often --wait looks at the queue.
POLL_S = 1.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("submit", help="queue an experiment's runs for the fleet's benches",
                       description="Validate an experiment, store it and every file it names "
                                   "in the PostgreSQL store, and queue one job per variant x "
                                   "test x repetition for the benches (hoplab worker). "
                                   "Prints the experiment's id. See docs/fleet.md.")
    p.add_argument("experiment", help="experiment file (see docs/experiment-format.md)")
    store_arg.add(p)
    p.add_argument("--bench", dest="benches", action="append", default=[], metavar="NAME",
                   help="only these benches (default: any)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="only benches with this label (all of them, if given several)")
    p.add_argument("--wait", action="store_true",
                   help="wait for every run, show progress and the summary; exit 0 if "
                        "every run is ok, else 1")
    p.add_argument("--json", action="store_true",
                   help="with --wait, print what `hoplab run --json` prints; without, the "
                        "experiment's id, seed and number of jobs")
    p.set_defaults(func=run)


def _check(path: str) -> None:
    """Every problem of the files, one line each, as `hoplab check` prints them: exit 2."""
    from hoplab.errors import UsageError
    from hoplab.spec.experiment_loader import check_experiment

    _, problems = check_experiment(path)
    if problems:
        for p in problems[:-1]:
            print(f"hoplab: error: {p}", file=sys.stderr)
        raise UsageError(str(problems[-1]))


def _records(store: Store, experiment_id: str) -> list[RunRecord]:
    return [store.get_run(r.id, series=False)
            for r in store.list_runs({"experiment_id": experiment_id}, figures=False)]


def _wait(db: str | None, experiment_id: str, total: int, quiet: bool) -> None:
    """Until no job of the experiment waits or runs: a progress bar on a terminal, else a
    line on stderr whenever the counts change (nothing with `quiet`)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from hoplab.fleet.queue.db import connect
    from hoplab.fleet.queue.schema import QUEUE
    from hoplab.fleet.queue.submit import job_states
    from hoplab.render.console import console as make_console

    console = make_console(stderr=True)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                   console=console, transient=True) \
        if console.is_terminal and not quiet else None
    task = bar.add_task("queued", total=total) if bar is not None else None
    said = None
    with connect(db, tables=[QUEUE]) as conn, bar if bar is not None else contextlib.nullcontext():
        while True:
            states = job_states(conn, experiment_id)
            done = total - states.get("todo", 0) - states.get("doing", 0)
            line = (f"{done}/{total} runs done, {states.get('doing', 0)} running, "
                    f"{states.get('failed', 0)} failed")
            if bar is not None and task is not None:
                bar.update(task, completed=done, description=line)
            elif line != said and not quiet:
                print(f"hoplab: {line}", file=sys.stderr, flush=True)
            said = line
            if done >= total:
                return
            time.sleep(POLL_S)


def run(args: argparse.Namespace) -> int:
    import dataclasses
    from pathlib import Path

    from hoplab import kv
    from hoplab.cli.run import run_json, stored_line
    from hoplab.fleet.queue.db import connect, conninfo
    from hoplab.fleet.queue.schema import QUEUE
    from hoplab.fleet.queue.submit import enqueue, job_states, pack, submitted
    from hoplab.render.console import console as make_console
    from hoplab.render.summary import summary_table
    from hoplab.spec.experiment_loader import load_experiment

    db = store_arg.url(args)
    conninfo(db)  # a SQLite store is refused first
    where = kv.parse(args.where, "--where", "--where device=erx")
    _check(args.experiment)
    exp = load_experiment(args.experiment)
    experiment_id = enqueue(db, pack(db, Path(args.experiment)), benches=args.benches,
                            where=where)
    seed, jobs = submitted(db, experiment_id)
    exp = dataclasses.replace(exp, seed=seed)
    if not args.wait:
        if args.json:
            json.dump({"experiment": exp.name, "experiment_id": experiment_id, "seed": seed,
                       "jobs": jobs}, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print(experiment_id)
        return 0
    if not args.json:
        print(f"submitted {exp.name}: {exp.runs()} runs, seed {exp.seed}, experiment id "
              f"{experiment_id}", flush=True)
    _wait(db, experiment_id, exp.runs(), args.json)
    with store_arg.reading(args) as store:
        records = _records(store, experiment_id)
        describe = store.describe()
    with connect(db, tables=[QUEUE]) as conn:
        states = job_states(conn, experiment_id)
    if args.json:
        json.dump(run_json(exp, experiment_id, records, describe, False), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        console = make_console()
        console.print(summary_table(records, title=f"{exp.name}: median over repetitions"))
        ids = [r.id for r in records if r.id is not None]
        if ids:
            console.print(stored_line(ids, describe, experiment_id), highlight=False,
                          markup=False)
    for r in records:
        if r.status != "ok" and not args.json:
            print(f"run {r.id} ({r.test} {kv.pairs(r.variant)}) {r.status} on bench "
                  f"{r.labels.get('bench', '?')}: {r.error}", file=sys.stderr)
    return 0 if states.get("succeeded", 0) == exp.runs() else 1
