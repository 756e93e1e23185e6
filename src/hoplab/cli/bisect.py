"""`hoplab bisect run` and `hoplab bisect check`: git bisect that knows noise.

`run` measures the good and the bad revision, refuses when they do not differ
beyond the noise, then drives `git bisect run` with `check` as its script and
always leaves the repository's bisect state reset. `check` alone is the script
for people who drive git themselves. This module parses the arguments and prints
the result: run/bisect.py bisects, run/commits.py takes the runs, run/git.py talks
to git and analysis/adaptive.py gives the verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hoplab import kv
from hoplab.cli import store_arg
from hoplab.errors import HoplabError, UsageError

if TYPE_CHECKING:
    from hoplab.analysis.adaptive import Verdict
    from hoplab.fleet.bisect.driver import FleetBisected
    from hoplab.run.bisect import Bisected, EveryStep, Outcome, Refused, Step
    from hoplab.run.commits import Target


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bisect", help="find the commit that changed a figure (git bisect "
                                      "that knows noise)",
                       description="Bisect a repository by a measured figure, with adaptive "
                                   "repetitions. See docs/versions.md.")
    bsub = p.add_subparsers(dest="bisect_command", metavar="ACTION", required=True)

    r = bsub.add_parser("run", help="measure good and bad, then drive git bisect run",
                        description="Measure GOOD and BAD; if they differ beyond the noise, "
                                    "drive `git bisect run` in the repository with `hoplab "
                                    "bisect check` at each commit; print the first bad commit "
                                    "and every step. The bisect state is always reset.")
    r.add_argument("experiment", help="experiment file, relative to the repository (one "
                                      "variant, one test); read at each commit")
    r.add_argument("--repo", required=True, metavar="DIR", help="the git repository")
    r.add_argument("--good", required=True, metavar="REV", help="a revision with the old behaviour")
    r.add_argument("--bad", required=True, metavar="REV",
                   help="a later revision with the new behaviour")
    r.add_argument("--all", action="store_true",
                   help="find every step between the two revisions, not only one")
    r.add_argument("--min-step", type=float, default=2.0, metavar="PCT",
                   help="with --all: a change shown smaller than this is no step "
                        "(default 2 %%)")
    r.add_argument("--json", action="store_true",
                   help="the result as JSON on stdout (progress stays on stderr)")
    r.add_argument("--fleet", action=_Fleet, nargs=0,
                   help="measure on the fleet's benches (hoplab worker), k commits a round "
                        "on k idle benches; --repo and --build must be valid on each "
                        "(a PostgreSQL store; see docs/versions.md)")
    r.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="with --fleet: only benches with this label (all of them, if "
                        "given several)")
    _common(r)
    r.set_defaults(func=run_bisect, needs_root=True)

    c = bsub.add_parser("check", help="a git bisect run script: 0 like good, 1 like bad, "
                                      "125 cannot tell",
                        description="Measure the checked-out commit (labelled commit=SHA) "
                                    "and answer 0 if it is like the GOOD runs, 1 if like the "
                                    "BAD runs, 125 if it cannot tell at --max-repeat. Errors "
                                    "exit 128, which aborts git bisect run.")
    c.add_argument("experiment", help="experiment file (one variant, one test)")
    c.add_argument("--good", required=True, metavar="SELECTION",
                   help="runs like good: ids or KEY=VALUE (commit=SHA, version=v1)")
    c.add_argument("--bad", required=True, metavar="SELECTION", help="runs like bad")
    _common(c)
    c.add_argument("--record-steps", help=argparse.SUPPRESS)
    c.set_defaults(func=run_check, needs_root=True)


class _Fleet(argparse.Action):
    """--fleet: the benches measure, so this machine needs no root."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        namespace.fleet = True
        namespace.needs_root = False


def _common(p: argparse.ArgumentParser) -> None:
    store_arg.add(p)
    p.add_argument("--metric", default="goodput",
                   help="the figure to bisect by (default goodput; NAME@FLOW for one flow)")
    p.add_argument("--max-repeat", type=int, default=20, metavar="N",
                   help="repetitions per commit at most; unknown there answers 125 "
                        "(default 20)")
    p.add_argument("--label", dest="labels", action="append", default=[],
                   metavar="KEY=VALUE", help="stored with the runs and selecting them "
                                             "(device=r7800); repeatable")
    p.add_argument("--build", metavar="CMD",
                   help="shell command run in the checkout before measuring a commit "
                        "($HOPLAB_COMMIT is its SHA); non-zero skips it")
    p.add_argument("--build-timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="a build still running after this long is killed (its whole "
                        "process group) and its commit cannot be told (125) "
                        "(default 3600)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def _target(args: argparse.Namespace, experiment: str) -> Target:
    from hoplab.run.commits import Target

    if getattr(args, "min_step", 1.0) <= 0:
        raise UsageError(f"--min-step {args.min_step}: a step must be above 0 %")
    if args.max_repeat < 5:
        raise UsageError(f"--max-repeat {args.max_repeat}: the rank test needs 5 repetitions "
                         "a side before it can say p < 0.01")
    labels = kv.parse(args.labels, "--label", "device=r7800")
    if "commit" in labels:
        raise UsageError("--label commit=...: the commit label is the measured commit's SHA")
    if args.build_timeout is not None and not args.build:
        raise UsageError("--build-timeout: only with --build")
    timeout = {} if args.build_timeout is None else {"build_timeout": args.build_timeout}
    return Target(experiment=experiment, metric=args.metric, labels=labels,
                  build=args.build, max_repeat=args.max_repeat, **timeout)


def _store_url(args: argparse.Namespace) -> str:
    # check runs in the repository's directory: a relative SQLite path must not move there.
    url = store_arg.url(args) or "hoplab.db"
    return url if "://" in url else str(Path(url).resolve())


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- check ---------------------------------------------------------------------------


def run_check(args: argparse.Namespace) -> int:
    from hoplab.run.bisect import check_head
    from hoplab.run.git import ABORT

    try:
        target = _target(args, str(Path(args.experiment).resolve()))
        url = _store_url(args)
        # What this check starts (the build, the lab's tools) has no use of the store,
        # and `bisect run` hands it over here: its URL may hold a password.
        os.environ.pop(store_arg.ENV, None)
        return check_head(target, url, args.good, args.bad, args.record_steps, _say)
    except HoplabError as e:
        _say(f"hoplab: error: {e} (exit {ABORT}: git bisect run stops)")
        return ABORT


# --- run -----------------------------------------------------------------------------


def run_bisect(args: argparse.Namespace) -> int:
    from hoplab.run.bisect import Bisected, EveryStep, Range, Refused, bisect

    if getattr(args, "fleet", False):
        return _run_fleet(args)
    if args.where:
        raise UsageError("--where: only with --fleet (it picks the benches)")
    rng = Range.of(args.repo, args.good, args.bad, args.experiment)
    target = _target(args, rng.experiment)
    url = _store_url(args)

    def script(good: str, bad: str, steps_file: str) -> tuple[list[str], dict[str, str]]:
        # The store goes to the check in its environment, not on its command line: git
        # echoes that, `ps` shows it to everyone, and the URL may hold a password.
        argv = [sys.executable, "-m", "hoplab.cli.main", "bisect", "check",
                str(rng.repo.top / target.experiment), "--good", good, "--bad", bad,
                "--metric", target.metric, "--max-repeat", str(target.max_repeat),
                "--record-steps", steps_file,
                *(f"--label={k}={v}" for k, v in target.labels.items()),
                *(("--build", target.build, "--build-timeout", str(target.build_timeout))
                  if target.build else ())]
        return argv, {store_arg.ENV: url}

    found = bisect(rng, target, url, script, _say, every=args.all,
                   min_step=args.min_step / 100)
    if isinstance(found, Refused):
        _refuse(found, args)
        return 1
    if isinstance(found, Bisected):
        _report(found, args)
        return 0 if found.first_bad else 1
    assert isinstance(found, EveryStep)
    _every_step(found, args)
    return 0 if found.found else 1


def _run_fleet(args: argparse.Namespace) -> int:
    from hoplab.fleet.bisect.driver import FleetBisected, bisect_fleet
    from hoplab.fleet.queue.db import conninfo
    from hoplab.run.bisect import Range, Refused

    url = store_arg.url(args)
    conninfo(url)  # a SQLite store is refused before anything else
    assert url is not None
    if args.all:
        raise UsageError("--all with --fleet: the fleet finds one step (the first bad "
                         "commit); run --all without --fleet")
    where = kv.parse(args.where, "--where", "--where device=erx")
    for key in ("commit", "bench"):
        if key in where:
            raise UsageError(f"--where {key}=...: {key} is not a bench's label")
    rng = Range.of(args.repo, args.good, args.bad, args.experiment)
    target = _target(args, rng.experiment)
    found = bisect_fleet(rng, target, url, where, _say)
    if isinstance(found, Refused):
        _refuse(found, args)
        return 1
    assert isinstance(found, FleetBisected)
    _report(found, args)
    return 0 if found.first_bad else 1


def _refuse(found: Refused, args: argparse.Namespace) -> None:
    ends = found.ends
    if args.json:
        from hoplab.analysis.power import power_figures

        power = power_figures(ends.cv, len(ends.a), len(ends.b), alpha=ends.alpha,
                              change=abs(ends.change) if ends.change else None)
        _dump({**_ends_json(found, args), "first_bad": None, "steps": [],
               "reason": "good and bad do not differ beyond the noise",
               "power": power.to_json()})
        return
    print(f"cannot decide: good ({args.good}) and bad ({args.bad}) do not differ beyond the "
          f"noise at {len(ends.a)} vs {len(ends.b)} runs: {args.metric} {ends.describe()}. "
          f"{ends.power.describe()}; a {abs(ends.change) * 100:.1f} % change needs "
          f"{_needed(ends)}. No commit is named.")


def _dump(doc: dict[str, Any]) -> None:
    from hoplab.jsonsafe import json_safe

    json.dump(json_safe(doc), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def _ends_json(found: Outcome, args: argparse.Namespace) -> dict[str, Any]:
    """The JSON document's head: the metric, GOOD and BAD with their medians and runs,
    and the change from one to the other."""
    ends, good, bad = found.ends, found.good, found.bad
    return {"metric": args.metric, "mode": "all" if args.all else "bisect",
            "good": {"commit": good, "subject": found.subjects[good], "median": ends.median_a,
                     "runs": len(ends.a)},
            "bad": {"commit": bad, "subject": found.subjects[bad], "median": ends.median_b,
                    "runs": len(ends.b), "change_pct": ends.change * 100, "p": ends.p,
                    "ci_pct": [ends.ci[0] * 100, ends.ci[1] * 100]}}


def _needed(v: Verdict) -> str:
    from hoplab.analysis.power import repetitions_needed

    n = repetitions_needed(abs(v.change), v.cv, alpha=v.alpha) if v.change else None
    return f"{n} repetitions per side" if n else "more repetitions than are practical"


def _report(found: Bisected, args: argparse.Namespace) -> None:
    from hoplab.fleet.bisect.driver import FleetBisected
    from hoplab.run.git import ABORT, SKIP

    ends, first, steps, subject = found.ends, found.first_bad, found.steps, found.subjects
    fleet = found if isinstance(found, FleetBisected) else None
    if args.json:
        _dump({**_ends_json(found, args),
               "first_bad": {"commit": first, "subject": subject[first]} if first else None,
               "steps": [_step_json(found, s) for s in steps],
               "reason": None if first else _undecided(found)[0],
               **({} if fleet is None else _rounds_json(fleet))})
        return
    heads = {} if fleet is None else _round_heads(fleet)
    unit_scale = ends.median_a
    show = _shower(args.metric)
    print(f"good {subject[found.good]}: {args.metric} median "
          f"{show(ends.median_a)} ({len(ends.a)} runs)")
    p = "" if ends.p is None else f", p = {ends.p:.2g}"
    print(f"bad  {subject[found.bad]}: {args.metric} median "
          f"{show(ends.median_b)} ({len(ends.b)} runs), {ends.change * 100:+.1f} %{p}")
    for i, s in enumerate(steps, 1):
        if i in heads:
            print(heads[i])
        sha = s.get("commit") or "?"
        line = f"step {i}: {subject.get(sha, sha)}: {s['word']}"
        if s.get("runs"):
            line += f", {s['runs']} runs ({s.get('new_runs', 0)} new), median {show(s['median'])}"
            if unit_scale:
                line += f" ({100 * (s['median'] / unit_scale - 1):+.1f} % vs good)"
        if "bench" in s:
            line += f", bench {s['bench']}"
        if s["answer"] in (SKIP, ABORT):
            line += f": {s['reason']}"
        print(line)
    if first:
        rounds = "" if fleet is None else f" ({len(fleet.rounds)} rounds)"
        print(f"first bad commit: {subject[first]} ({first}) in {len(steps)} steps{rounds}")
    else:
        print(f"cannot decide: {_undecided(found)[1]}; no commit is named")


def _undecided(found: Bisected) -> tuple[str, str]:
    """Why no first bad commit was named: for --json, and as the text says it."""
    from hoplab.fleet.bisect.driver import FleetBisected
    from hoplab.fleet.bisect.kary import GIVE_UP, SKIP

    n = len(found.steps)
    if not isinstance(found, FleetBisected):
        return ("git bisect ended without a first bad commit (only commits that could not "
                "be told were left)",
                f"git bisect ended without a first bad commit after {n} steps (commits it "
                "could not tell are listed above)")
    lo, hi = found.subjects[found.last_good], found.subjects[found.bad_bound]
    if found.code == SKIP:
        why = (f"the first bad commit is after {lo} and at most {hi} "
               f"({found.bad_bound}): only commits that could not be told lie between")
    else:
        why = (f"{GIVE_UP} commits could not be told, so the search gave up; the first "
               f"bad commit is after {lo} and at most {hi} ({found.bad_bound})")
    return why, f"{why}, after {n} steps in {len(found.rounds)} rounds"


def _round_heads(found: FleetBisected) -> dict[int, str]:
    """The line before each round's first step, by that step's number."""
    heads, i = {}, 1
    for r, (shas, k) in enumerate(zip(found.rounds, found.benches, strict=True), 1):
        heads[i] = (f"round {r}: {len(shas)} commit{'s' * (len(shas) != 1)} on {k} "
                    f"bench{'es' * (k != 1)}")
        i += len(shas)
    return heads


def _rounds_json(found: FleetBisected) -> dict[str, Any]:
    return {"rounds": [{"benches": k, "commits": shas}
                       for shas, k in zip(found.rounds, found.benches, strict=True)],
            "last_good": found.last_good, "bad_bound": found.bad_bound}


def _step_json(found: Bisected, step: Step) -> dict[str, Any]:
    """One step of `bisect run --json`: what `check` recorded, named as the text is."""
    from hoplab.run.git import ABORT, SKIP

    sha = step.get("commit")
    median = step.get("median")
    good = found.ends.median_a
    return {"commit": sha, "subject": found.subjects[sha] if sha else None,
            "verdict": step["word"], "answer": step["answer"], "runs": step.get("runs", 0),
            "new_runs": step.get("new_runs", 0), "median": median,
            "change_vs_good_pct": 100 * (median / good - 1)
            if median is not None and good else None,
            "vs_good": step.get("vs_good"), "vs_bad": step.get("vs_bad"),
            "reason": step["reason"] if step["answer"] in (SKIP, ABORT) else None,
            "power": step.get("power")}


def _shower(metric: str) -> Callable[[float], str]:
    from hoplab.analysis.compare import parse_metric
    from hoplab.render.units import figure

    name = parse_metric(metric).name
    return lambda v: figure(v, name)


def _every_step(found: EveryStep, args: argparse.Namespace) -> None:
    subject, min_step = found.subjects, found.min_step
    if args.json:
        first = found.found[0][0] if found.found else None
        _dump({"metric": args.metric, "mode": "all",
               "good": {"commit": found.good, "subject": subject[found.good]},
               "bad": {"commit": found.bad, "subject": subject[found.bad]},
               "first_bad": {"commit": first, "subject": subject[first]} if first else None,
               "steps": [{"commit": sha, "subject": subject[sha],
                          "median_before": v.median_a, "median_after": v.median_b,
                          "change_pct": v.change * 100, "p": v.p,
                          "ci_pct": [v.ci[0] * 100, v.ci[1] * 100],
                          "runs_before": len(v.a), "runs_after": len(v.b)}
                         for sha, v in found.found],
               "untold": [{"from": lo_sha, "to": hi_sha,
                           "reason": f"cannot tell whether they differ by {min_step * 100:g} "
                                     "% or more (unknown at --max-repeat, or not testable)"}
                          for lo_sha, hi_sha in found.untold],
               "reason": None if found.found else "no step found between the two revisions"})
        return
    show = _shower(args.metric)
    for sha, v in found.found:
        print(f"step at {subject[sha]} ({sha}): median {show(v.median_a)} -> "
              f"{show(v.median_b)}, {v.change * 100:+.1f} % ({v.describe()})")
    for lo_sha, hi_sha in found.untold:
        print(f"cannot tell whether {lo_sha[:12]} and {hi_sha[:12]} differ by "
              f"{min_step * 100:g} % or more (unknown at --max-repeat, or not testable)")
    n = len(found.found)
    print(f"{n} step{'s' * (n != 1)} between {found.good[:12]} and {found.bad[:12]}")
