"""`hoplab run EXPERIMENT.toml`: run every variant x test x repetition and store each run."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hoplab import kv
from hoplab.cli import store_arg
from hoplab.errors import HoplabError
from hoplab.lab.signals import terminate_as_interrupt
from hoplab.spec.names import given, lab_name

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from hoplab.record import RunRecord
    from hoplab.run.experiment import Job
    from hoplab.run.experiment import Progress as RunProgress
    from hoplab.spec.experiment import Experiment, Test, Variant
    from hoplab.store import Store

# The runner, the store and rich are imported in the functions that use them: at the
# top they would make `hoplab run --help` take a second.


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run an experiment and store its runs",
                       description="Run every variant x test x repetition of an experiment "
                                   "file in a seeded random order; each run is stored as it "
                                   "ends.")
    p.add_argument("experiment", help="experiment file (see docs/experiment-format.md)")
    store_arg.add(p)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key: a matrix key (hops=2; qos=on keeps one named "
                        "variant), a test option (duration=5s, tests.NAME.flows=2), repeat, "
                        "seed, labels.NAME")
    p.add_argument("--repeat", type=int, help="repetitions of each variant x test")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("--lab-name", help="name of the lab built for the runs (default: random)")
    p.set_defaults(func=run, needs_root=True)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _expected_seconds(exp: Experiment) -> float:
    return sum(t.duration_s + 2.0 for v in exp.variants for t in v.tests) * exp.repeat


def _progress(exp: Experiment, bar: Progress | None, console: Console, plain: bool = False
              ) -> tuple[RunProgress, list[float]]:
    """`plain`: no bar is drawn (stdout is no terminal): a line per finished run."""
    from rich.markup import escape

    from hoplab.run.experiment import Progress as RunProgress

    # Names come from the experiment file and errors from the devices' stderr: shown as
    # they are, never read as rich markup.
    done = [0.0]
    finished = [0]
    total = exp.runs()
    task = bar.add_task("starting", total=_expected_seconds(exp)) if bar else None

    def start_run(order: int, job: Job, variant: Variant, test: Test) -> None:
        if bar is not None and task is not None:
            bar.update(task, description=escape(f"run {order + 1}/{total}: {test.name} "
                                                f"{variant.label()} rep {job.repetition}"))

    def tick(t: float) -> None:
        if bar is not None and task is not None:
            bar.update(task, completed=done[0] + t)

    def end_run(rec: RunRecord) -> None:
        done[0] += rec.duration_s + 2.0
        finished[0] += 1
        if bar is not None and task is not None:
            bar.update(task, completed=done[0])
        elif plain:
            console.print(finished_line(finished[0], total, rec), markup=False,
                          highlight=False)
        if rec.status != "ok":
            console.print(f"run {rec.id} ({rec.test} {kv.pairs(rec.variant)}) "
                          f"{rec.status}: {rec.error}", style="yellow", markup=False,
                          highlight=False)

    def note(message: str) -> None:
        if bar is not None and message.startswith("warning"):
            console.print(message, markup=False)

    return RunProgress(start_run, tick, end_run, note), done


def interrupted_line(records: Sequence[RunRecord]) -> str:
    """Both truths in one line: the runs that finished, and the one cut short (stored
    as interrupted, with what it had measured)."""
    from hoplab.render.units import id_list

    done = sum(r.status != "interrupted" for r in records)
    cut = [r.id for r in records if r.status == "interrupted" and r.id is not None]
    kept = f"{done} finished run{'s' * (done != 1)} kept"
    if cut:
        kept += (f", run{'s' * (len(cut) > 1)} {id_list(cut)} cut short and stored as "
                 "interrupted")
    return f"hoplab: interrupted; {kept}; the lab is down"


def finished_line(order: int, total: int, rec: RunRecord) -> str:
    """A line per finished run where no progress bar is drawn (a log, `| tee`): what ran,
    how it ended, its headline figure."""
    from hoplab import metrics
    from hoplab.render.headline import HEADLINE
    from hoplab.render.units import value

    what = " ".join(x for x in (rec.test, kv.pairs(rec.variant), f"rep {rec.repetition}") if x)
    line = f"run {order}/{total} {rec.status}: {what} (run {rec.id}, {rec.duration_s:.0f} s)"
    name = next((n for n in HEADLINE.get(rec.kind, ()) if rec.metric(n) is not None), None)
    if rec.status == "ok" and name is not None:
        got = rec.metric(name)
        assert got is not None
        line += f": {metrics.label(name)} {value(got, metrics.unit(name))}"
    return line


def stored_line(ids: list[int], store: str, experiment_id: str | None) -> str:
    """What `hoplab run` says it stored: "stored run 3 in ..." (not "runs 3-3")."""
    from hoplab.render.units import id_list

    return (f"stored run{'s' * (len(ids) > 1)} {id_list(ids)} in {store} (experiment id "
            f"{experiment_id}); see hoplab runs, hoplab show ID")


def run_json(exp: Experiment, experiment_id: str, records: Sequence[RunRecord],
             store_desc: str, interrupted: bool) -> dict[str, Any]:
    """What `hoplab run --json` prints (and `hoplab submit --wait --json`)."""
    from hoplab.jsonsafe import json_safe
    from hoplab.render.summary import summary_rows

    # A figure that could not be computed (NaN: Jain's index when no host got a byte)
    # is null: JSON has no NaN.
    out: dict[str, Any] = json_safe({
        "experiment": exp.name, "experiment_id": experiment_id, "seed": exp.seed,
        "store": store_desc, "interrupted": interrupted,
        "runs": [{"id": r.id, "test": r.test, "kind": r.kind, "variant": r.variant,
                  "repetition": r.repetition, "status": r.status, "error": r.error,
                  "metrics": {m.name: m.value for m in r.metrics
                              if m.flow is None and m.node is None and m.key is None},
                  "grade": r.metadata.get("grade")}
                 for r in records],
        "summary": summary_rows(records),
    })
    return out


def _keep_judged(store: Store, ids: list[int]) -> None:
    """The dashboard's home reads each series' judged changes from the store; the runs are
    stored whatever becomes of that (the home judges what it lacks)."""
    from hoplab.analysis.changes import keep_judged
    from hoplab.kinds import HEADLINES

    try:
        keep_judged(store, HEADLINES, ids)
    except HoplabError as exc:
        print(f"hoplab: note: the runs' series were not judged for the dashboard: {exc}",
              file=sys.stderr)


def _print_result(args: argparse.Namespace, exp: Any, runner: Any, store: str, console: Any,
                  interrupted: bool) -> None:
    """The JSON document, or the summary table and where the runs are stored."""
    from hoplab.render.summary import summary_table

    if args.json:
        json.dump(run_json(exp, runner.experiment_id, runner.records, store, interrupted),
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    console.print(summary_table(runner.records, title=f"{exp.name}: median over "
                                                      f"repetitions"))
    ids = [r.id for r in runner.records if r.id is not None]
    if ids:
        console.print(stored_line(ids, store, runner.experiment_id), highlight=False,
                      markup=False)


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from hoplab.render.console import console as make_console
    from hoplab.run.experiment import ExperimentRunner
    from hoplab.spec.experiment_loader import load_experiment

    if args.lab_name is not None:
        given(lab_name, args.lab_name, "run --lab-name")
    exp = load_experiment(args.experiment, args.sets, repeat=args.repeat)
    console = make_console(stderr=args.json)
    with store_arg.writing(args) as store:
        interactive = not args.json and console.is_terminal
        bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                       TimeRemainingColumn(), console=console, transient=True) \
            if interactive else None
        progress, _ = _progress(exp, bar, console, plain=not args.json and bar is None)
        runner = ExperimentRunner(exp, store, progress, lab_name=args.lab_name)
        if not args.json:
            tests = len(exp.variants[0].tests)
            console.print(f"experiment [bold]{escape(exp.name)}[/]: "
                          f"{_n(len(exp.variants), 'variant')} x {_n(tests, 'test')} x "
                          f"{_n(exp.repeat, 'repetition')} = {_n(exp.runs(), 'run')}, "
                          f"seed {exp.seed}, store {escape(store.describe())}")
        interrupted = False
        try:
            # The first Ctrl-C, SIGTERM or SIGHUP stops the experiment; the ones after it
            # are ignored until the current run is stored and the lab is down.
            with terminate_as_interrupt(shield_after_first=True):
                if bar is not None:
                    with bar:
                        runner.run()
                else:
                    runner.run()
        except KeyboardInterrupt:
            interrupted = True
        _keep_judged(store, [r.id for r in runner.records if r.id is not None])
        _print_result(args, exp, runner, store.describe(), console, interrupted)
    if exp.report and not args.json and not interrupted:
        from hoplab.cli.run_report import after_runs

        after_runs(args, runner.records, [kv.pairs(v.values) for v in exp.variants])
    if interrupted:
        print(interrupted_line(runner.records), file=sys.stderr)
        return 130
    return 1 if any(r.status != "ok" for r in runner.records) else 0
