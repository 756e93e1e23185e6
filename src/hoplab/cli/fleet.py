"""`hoplab fleet`: the benches, the queue and the experiments; `fleet cancel ID`,
`fleet drain BENCH`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from hoplab.cli import store_arg

if TYPE_CHECKING:
    from hoplab.fleet.queue.status import FleetStatus


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("fleet", help="the fleet: benches, jobs, experiments, failures",
                       description="Show the benches (idle, busy, draining, stopped or gone), "
                                   "the jobs by state, each experiment's progress and every "
                                   "failure; `fleet cancel EXPERIMENT_ID` drops its waiting "
                                   "jobs and stops its runs under way; `fleet drain BENCH` "
                                   "has a bench finish its run and stop. See docs/fleet.md.")
    p.add_argument("action", nargs="?", choices=["cancel", "drain"],
                   help="cancel an experiment, or drain a bench")
    p.add_argument("target", nargs="?", metavar="EXPERIMENT_ID|BENCH")
    store_arg.add(p)
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=run)


def _ago(t: float) -> str:
    s = max(0.0, time.time() - t)
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago"


def _show(st: FleetStatus) -> None:
    from rich.table import Table

    from hoplab import kv
    from hoplab.render.console import console as make_console

    console = make_console()
    benches = Table(title="benches")
    for col in ("bench", "labels", "machine", "state", "heartbeat", "job"):
        benches.add_column(col)
    for b in st.benches:
        benches.add_row(b.name, kv.pairs(b.labels), b.machine, b.state,
                        _ago(b.last_heartbeat), "" if b.current_job is None
                        else str(b.current_job))
    console.print(benches)
    console.print("jobs: " + (", ".join(f"{n} {s}" for s, n in st.jobs.items()) or "none"),
                  markup=False, highlight=False)
    exps = Table(title="experiments")
    for col in ("id", "name", "submitted", "done", "running", "waiting", "failed"):
        exps.add_column(col)
    for e in st.experiments:
        done = e.jobs - e.states.get("todo", 0) - e.states.get("doing", 0)
        exps.add_row(e.id, e.name + (" (cancelled)" if e.cancelled else ""),
                     _ago(e.submitted_at), f"{done}/{e.jobs}", str(e.states.get("doing", 0)),
                     str(e.states.get("todo", 0)), str(e.states.get("failed", 0)))
    console.print(exps)
    for f in st.failures:
        run = f" run {f.run_id}" if f.run_id is not None else ""
        console.print(f"failed: experiment {f.experiment_id} job {f.job_id}{run} on bench "
                      f"{f.bench or '?'}: {f.error}", markup=False, highlight=False)
    for line in _events(st):
        console.print(line, markup=False, highlight=False)


def _events(st: FleetStatus) -> list[str]:
    """The failed bisection jobs, the jobs handed on, the superseded runs, the waits."""
    out = [f"failed: bisection {f.bisection} job {f.job_id} (commit {f.commit[:12]}) on "
           f"bench {f.bench or '?'}: {f.error}" for f in st.bisection_failures]
    out += [f"handed on: job {h.job_id} ({h.task}) from bench {h.bench or '?'}, silent, "
            f"back in the queue by bench {h.by_bench} {_ago(h.at)} (attempt {h.attempt + 1})"
            for h in st.handovers]
    out += [f"superseded: run {r.run_id} of job {r.job_id} stored by bench {r.bench} "
            f"{_ago(r.at)} after the job was handed on: kept, never counted"
            for r in st.superseded]
    for w in st.device_waits:
        held = "nobody now" if w.held_by is None else (
            f"bench {w.held_by}" + (f" (job {w.held_job})" if w.held_job is not None else "")
            + f" since {_ago(w.held_since or 0)}")
        out.append(f"waiting: job {w.job_id} on bench {w.bench} for device {w.device} since "
                   f"{_ago(w.since)}, held by {held}")
    return out


def run(args: argparse.Namespace) -> int:
    from hoplab.errors import UsageError
    from hoplab.fleet.queue import status
    from hoplab.fleet.queue.db import conninfo

    db = store_arg.url(args)
    conninfo(db)  # a SQLite store is refused first
    if args.action is not None and not args.target:
        raise UsageError(f"fleet {args.action}: name the "
                         f"{'experiment id' if args.action == 'cancel' else 'bench'}")
    if args.action == "cancel":
        # Submitting's module, with the loader and the runner's order of jobs: only here.
        from hoplab.fleet.queue.submit import cancel

        n = cancel(db, args.target)
        print(f"experiment {args.target}: {n} waiting job{'s' * (n != 1)} cancelled; a "
              f"run under way is stopped, stored as cancelled")
        return 0
    if args.action == "drain":
        before = status.drain(db, args.target)
        print(f"bench {args.target} ({before}) drains: it finishes its run and stops")
        return 0
    st = status.fleet_status(db)
    if args.json:
        json.dump(st.as_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _show(st)
    return 0
