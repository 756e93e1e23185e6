"""`hoplab bisect run` and `hoplab bisect check`: git bisect that knows noise.

`run` measures the good and the bad revision, refuses when they do not differ
beyond the noise, then drives `git bisect run` with `check` as its script and
always leaves the repository's bisect state reset. `check` alone is the script
for people who drive git themselves. Verdicts come from analysis/adaptive.py;
run/bisect.py takes the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hoplab import kv
from hoplab.cli import store_arg
from hoplab.errors import HoplabError, UsageError

if TYPE_CHECKING:
    from hoplab.analysis.adaptive import Classification, Verdict
    from hoplab.record import RunRecord
    from hoplab.run.bisect import Measurer, Target
    from hoplab.store import Store

# git bisect run reads 125 as "skip", 1..127 as bad and 128 or more as "abort".
ABORT = 128
# Commits answered "cannot tell" after which `bisect run` stops git: each costs
# --max-repeat runs, and git would skip its way through the whole range.
GIVE_UP = 3
_FIRST_BAD = re.compile(r"^([0-9a-f]{40}) is the first bad commit", re.M)


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


def _target(args: argparse.Namespace, experiment: str) -> Target:
    from hoplab.run.bisect import Target

    if getattr(args, "min_step", 1.0) <= 0:
        raise UsageError(f"--min-step {args.min_step}: a step must be above 0 %")
    if args.max_repeat < 5:
        raise UsageError(f"--max-repeat {args.max_repeat}: the rank test needs 5 repetitions "
                         "a side before it can say p < 0.01")
    labels = kv.parse(args.labels, "--label", "device=r7800")
    if "commit" in labels:
        raise UsageError("--label commit=...: the commit label is the measured commit's SHA")
    return Target(experiment=experiment, metric=args.metric, labels=labels,
                  build=args.build, max_repeat=args.max_repeat)


def _store_url(args: argparse.Namespace) -> str:
    # check runs in the repository's directory: a relative SQLite path must not move there.
    url = store_arg.url(args) or "hoplab.db"
    return url if "://" in url else str(Path(url).resolve())


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- check ---------------------------------------------------------------------------


def run_check(args: argparse.Namespace) -> int:
    from hoplab.run.bisect import CannotTest

    try:
        return _check(args)
    except CannotTest as e:
        _say(f"hoplab bisect check: cannot test this commit (125): {e}")
        _record(args.record_steps, {"commit": _head_or_none(), "answer": 125,
                                    "word": "skipped", "reason": str(e), "runs": 0})
        return 125
    except HoplabError as e:
        _say(f"hoplab: error: {e} (exit {ABORT}: git bisect run stops)")
        return ABORT


def _untold(path: str | None) -> int:
    if not path or not Path(path).exists():
        return 0
    return sum(json.loads(line).get("answer") == 125
               for line in Path(path).read_text().splitlines() if line.strip())


def _head_or_none() -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=False)
    return proc.stdout.strip() or None


def _check(args: argparse.Namespace) -> int:
    from hoplab.analysis.select import select_pair
    from hoplab.run.bisect import Measurer, check, git
    from hoplab.store import open_store

    here = Path.cwd()
    top = Path(git(here, "rev-parse", "--show-toplevel"))
    sha = git(here, "rev-parse", "HEAD")
    untold = _untold(args.record_steps)
    if untold >= GIVE_UP:
        # git would go on skipping, commit after commit, each at --max-repeat runs; the
        # noise is too large for this step at these repetitions.
        _say(f"hoplab bisect check: {untold} commits could not be told; giving up "
             f"(exit {ABORT}: git bisect run stops)")
        _record(args.record_steps, {"commit": sha, "answer": ABORT, "word": "gave up",
                                    "reason": f"{untold} commits could not be told",
                                    "runs": 0})
        return ABORT
    target = _target(args, str(Path(args.experiment).resolve()))
    with open_store(_store_url(args)) as store:
        ids_good, ids_bad = select_pair(store, args.good, args.bad)
        good = [store.get_run(i, series=False) for i in ids_good]
        bad = [store.get_run(i, series=False) for i in ids_bad]
        measurer = Measurer(store, target, _say, checkout=lambda _sha: top)
        found, n = check(measurer, sha, good, bad)
    _say(f"hoplab bisect check: {sha[:12]} is {found.word} ({found.reason}; {n} runs)")
    _record(args.record_steps, _step(sha, found, n, measurer.taken.get(sha, 0)))
    return found.answer


def _step(sha: str, found: Classification, n: int, taken: int) -> dict[str, Any]:
    return {"commit": sha, "answer": found.answer, "word": found.word, "reason": found.reason,
            "runs": n, "new_runs": taken, "median": found.vs_good.median_b,
            "vs_good": _pct(found.vs_good), "vs_bad": _pct(found.vs_bad),
            "power": found.vs_good.power.to_json()}


def _pct(v: Verdict) -> dict[str, Any]:
    return {"verdict": v.verdict, "change_pct": 100 * v.change, "p": v.p,
            "ci_pct": [100 * v.ci[0], 100 * v.ci[1]]}


def _record(path: str | None, step: dict[str, Any]) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(step) + "\n")


# --- run -----------------------------------------------------------------------------


class _Repo:
    """The repository being bisected: checks before, checkouts during, reset after."""

    def __init__(self, path: str) -> None:
        from hoplab.run.bisect import git

        self.git = git
        start = Path(path)
        if not start.is_dir():
            raise UsageError(f"--repo {path}: no such directory")
        self.top = Path(git(start, "rev-parse", "--show-toplevel"))
        if Path(self.top, git(self.top, "rev-parse", "--git-path", "BISECT_START")).exists():
            raise UsageError(f"a git bisect is already in progress in {self.top}; end it "
                             f"with `git -C {self.top} bisect reset` first")
        dirty = git(self.top, "status", "--porcelain", "--untracked-files=no")
        if dirty:
            raise UsageError(f"{self.top} has uncommitted changes ({dirty.splitlines()[0]}"
                             "...): bisection checks out other commits; commit or stash them")
        proc = subprocess.run(["git", "-C", str(self.top), "symbolic-ref", "-q", "--short",
                               "HEAD"], capture_output=True, text=True, check=False)
        self.orig = proc.stdout.strip() or git(self.top, "rev-parse", "HEAD")
        self.bisecting = False

    def commit(self, rev: str, option: str) -> str:
        proc = subprocess.run(["git", "-C", str(self.top), "rev-parse", "--verify", "-q",
                               f"{rev}^{{commit}}"], capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            raise UsageError(f"{option} {rev}: not a commit of {self.top}")
        return proc.stdout.strip()

    def checkout(self, sha: str) -> Path:
        if self.git(self.top, "rev-parse", "HEAD") != sha:
            self.git(self.top, "checkout", "-q", "--detach", sha)
        return self.top

    def subject(self, sha: str) -> str:
        return self.git(self.top, "log", "-1", "--format=%h %s", sha)

    def restore(self) -> None:
        """Back to where the user was, bisect state reset; never raises."""
        with suppress(HoplabError):
            if self.bisecting:
                self.git(self.top, "bisect", "reset")
                self.bisecting = False
            else:
                self.git(self.top, "checkout", "-q", self.orig)


def run_bisect(args: argparse.Namespace) -> int:
    from hoplab.lab.signals import terminate_as_interrupt
    from hoplab.run.bisect import Measurer
    from hoplab.store import open_store

    repo = _Repo(args.repo)
    good, bad = repo.commit(args.good, "--good"), repo.commit(args.bad, "--bad")
    if subprocess.run(["git", "-C", str(repo.top), "merge-base", "--is-ancestor", good, bad],
                      check=False).returncode != 0:
        raise UsageError(f"--good {args.good} is not an ancestor of --bad {args.bad}")
    experiment = Path(args.experiment)
    if experiment.is_absolute():
        if not experiment.resolve().is_relative_to(repo.top.resolve()):
            raise UsageError(f"{args.experiment} is not in {repo.top}: the experiment is "
                             "read at each commit, so it must be in the repository")
        experiment = experiment.resolve().relative_to(repo.top.resolve())
    target = _target(args, str(experiment))
    url = _store_url(args)
    with open_store(url) as store:
        measurer = Measurer(store, target, _say, checkout=repo.checkout)
        try:
            with terminate_as_interrupt():
                _say(f"measuring good {repo.subject(good)} and bad {repo.subject(bad)}")
                from hoplab.analysis.adaptive import judge_runs
                from hoplab.run.bisect import CannotTest, apart, references

                try:
                    g, b, ends = apart(measurer, good, bad)
                    if ends.verdict != "different":
                        _refuse(repo, ends, args, good, bad)
                        return 1
                    if args.all:
                        return _every_step(repo, measurer, good, bad, args.min_step / 100,
                                           args.json)
                    g, b = references(measurer, good, bad)
                except CannotTest as e:
                    raise UsageError(f"cannot measure an end of the range: {e}") from e
                ends = judge_runs(g, b, target.metric, bound=None)
                return _git_bisect(repo, args, target, url, store, good, bad, g, b, ends)
        finally:
            repo.restore()


def _refuse(repo: _Repo, ends: Verdict, args: argparse.Namespace, good: str, bad: str
            ) -> None:
    if args.json:
        from hoplab.analysis.power import power_figures

        power = power_figures(ends.cv, len(ends.a), len(ends.b), alpha=ends.alpha,
                              change=abs(ends.change) if ends.change else None)
        _dump({**_ends_json(repo, args, ends, good, bad), "first_bad": None, "steps": [],
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


def _ends_json(repo: _Repo, args: argparse.Namespace, ends: Verdict, good: str, bad: str
               ) -> dict[str, Any]:
    """The JSON document's head: the metric, GOOD and BAD with their medians and runs,
    and the change from one to the other."""
    return {"metric": args.metric, "mode": "all" if args.all else "bisect",
            "good": {"commit": good, "subject": repo.subject(good), "median": ends.median_a,
                     "runs": len(ends.a)},
            "bad": {"commit": bad, "subject": repo.subject(bad), "median": ends.median_b,
                    "runs": len(ends.b), "change_pct": ends.change * 100, "p": ends.p,
                    "ci_pct": [ends.ci[0] * 100, ends.ci[1] * 100]}}


def _needed(v: Verdict) -> str:
    from hoplab.analysis.power import repetitions_needed

    n = repetitions_needed(abs(v.change), v.cv, alpha=v.alpha) if v.change else None
    return f"{n} repetitions per side" if n else "more repetitions than are practical"


def _git_bisect(repo: _Repo, args: argparse.Namespace, target: Target, url: str,
                store: Store, good: str, bad: str, g: list[RunRecord], b: list[RunRecord],
                ends: Verdict) -> int:
    exp, test = g[0].experiment, g[0].test
    labels = "".join(f",{k}={v}" for k, v in target.labels.items())
    fd, steps_file = tempfile.mkstemp(prefix="hoplab-bisect-", suffix=".jsonl")
    os.close(fd)
    try:
        repo.git(repo.top, "checkout", "-q", repo.orig)
        repo.bisecting = True
        repo.git(repo.top, "bisect", "start", bad, good, "--")
        script = [sys.executable, "-m", "hoplab.cli.main", "bisect", "check",
                  str(repo.top / target.experiment),
                  "--good", f"experiment={exp},test={test},commit={good}{labels}",
                  "--bad", f"experiment={exp},test={test},commit={bad}{labels}",
                  "--db", url, "--metric", target.metric,
                  "--max-repeat", str(target.max_repeat), "--record-steps", steps_file,
                  *(f"--label={k}={v}" for k, v in target.labels.items()),
                  *(("--build", target.build) if target.build else ())]
        # Its own session: a Ctrl-C reaches this process only, which then stops git and
        # the check under way (SIGTERM: the check's run takes its lab down) and waits for
        # them before resetting the bisection.
        proc = subprocess.Popen(["git", "-C", str(repo.top), "bisect", "run", *script],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert proc.stdout is not None
        out = []
        try:
            for line in proc.stdout:
                out.append(line)
                _say("git: " + line.rstrip("\n"))
            proc.wait()
        except BaseException:
            _stop(proc)
            raise
        steps = [json.loads(line) for line in Path(steps_file).read_text().splitlines()
                 if line.strip()]
        first = _FIRST_BAD.search("".join(out))
        _report(repo, args, steps, ends, first.group(1) if first else None, good, bad)
        return 0 if first else 1
    finally:
        Path(steps_file).unlink(missing_ok=True)


def _stop(proc: subprocess.Popen[str]) -> None:
    from hoplab.lab.signals import shielded

    with shielded():
        for sig, wait in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


def _report(repo: _Repo, args: argparse.Namespace, steps: list[dict[str, Any]],
            ends: Verdict, first: str | None, good: str, bad: str) -> None:
    # good and bad as resolved before git bisect started: a revision such as HEAD~7
    # names another commit while the bisection has one checked out.
    if args.json:
        _dump({**_ends_json(repo, args, ends, good, bad),
               "first_bad": {"commit": first, "subject": repo.subject(first)} if first
               else None,
               "steps": [_step_json(repo, s, ends) for s in steps],
               "reason": None if first else "git bisect ended without a first bad commit "
                                            "(only commits that could not be told were left)"})
        return
    unit_scale = ends.median_a
    show = _shower(args.metric)
    print(f"good {repo.subject(good)}: {args.metric} median "
          f"{show(ends.median_a)} ({len(ends.a)} runs)")
    p = "" if ends.p is None else f", p = {ends.p:.2g}"
    print(f"bad  {repo.subject(bad)}: {args.metric} median "
          f"{show(ends.median_b)} ({len(ends.b)} runs), {ends.change * 100:+.1f} %{p}")
    for i, s in enumerate(steps, 1):
        sha = s.get("commit") or "?"
        line = f"step {i}: {repo.subject(sha) if sha != '?' else sha}: {s['word']}"
        if s.get("runs"):
            line += f", {s['runs']} runs ({s.get('new_runs', 0)} new), median {show(s['median'])}"
            if unit_scale:
                line += f" ({100 * (s['median'] / unit_scale - 1):+.1f} % vs good)"
        if s["answer"] in (125, ABORT):
            line += f": {s['reason']}"
        print(line)
    if first:
        print(f"first bad commit: {repo.subject(first)} ({first}) in {len(steps)} steps")
    else:
        print(f"cannot decide: git bisect ended without a first bad commit after "
              f"{len(steps)} steps (commits it could not tell are listed above); no commit "
              "is named")


def _step_json(repo: _Repo, step: dict[str, Any], ends: Verdict) -> dict[str, Any]:
    """One step of `bisect run --json`: what `check` recorded, named as the text is."""
    sha = step.get("commit")
    median = step.get("median")
    return {"commit": sha, "subject": repo.subject(sha) if sha else None,
            "verdict": step["word"], "answer": step["answer"], "runs": step.get("runs", 0),
            "new_runs": step.get("new_runs", 0), "median": median,
            "change_vs_good_pct": 100 * (median / ends.median_a - 1)
            if median is not None and ends.median_a else None,
            "vs_good": step.get("vs_good"), "vs_bad": step.get("vs_bad"),
            "reason": step["reason"] if step["answer"] in (125, ABORT) else None,
            "power": step.get("power")}


def _shower(metric: str) -> Callable[[float], str]:
    from hoplab.analysis.compare import parse_metric
    from hoplab.render.units import figure

    name = parse_metric(metric).name
    return lambda v: figure(v, name)


def _every_step(repo: _Repo, measurer: Measurer, good: str, bad: str,
                min_step: float, as_json: bool = False) -> int:
    from hoplab.run.bisect import CannotTest, apart

    show = _shower(measurer.target.metric)
    commits = [good, *repo.git(repo.top, "rev-list", "--first-parent", "--reverse",
                               f"{good}..{bad}").split()]
    found: list[tuple[str, Verdict]] = []
    untold: list[tuple[str, str]] = []
    todo = [(0, len(commits) - 1)]
    while todo:
        lo, hi = todo.pop(0)
        try:
            v = apart(measurer, commits[lo], commits[hi], bound=min_step)[2]
        except CannotTest as e:
            _say(f"cannot test: {e}")
            untold.append((commits[lo], commits[hi]))
            continue
        # Ends that differ at p < 0.01 by less than --min-step are no step either
        # (docs/versions.md): GRO on or off moves the NAT example's goodput by about 1 %,
        # which five runs a side can see but is not what --all looks for.
        if v.verdict == "same" or (v.verdict == "different" and abs(v.change) < min_step):
            continue
        if v.verdict != "different":
            untold.append((commits[lo], commits[hi]))
            continue
        if hi == lo + 1:
            found.append((commits[hi], v))
            continue
        mid = (lo + hi) // 2
        todo[:0] = [(lo, mid), (mid, hi)]
    if as_json:
        _dump({"metric": measurer.target.metric, "mode": "all",
               "good": {"commit": good, "subject": repo.subject(good)},
               "bad": {"commit": bad, "subject": repo.subject(bad)},
               "first_bad": ({"commit": found[0][0], "subject": repo.subject(found[0][0])}
                             if found else None),
               "steps": [{"commit": sha, "subject": repo.subject(sha),
                          "median_before": v.median_a, "median_after": v.median_b,
                          "change_pct": v.change * 100, "p": v.p,
                          "ci_pct": [v.ci[0] * 100, v.ci[1] * 100],
                          "runs_before": len(v.a), "runs_after": len(v.b)}
                         for sha, v in found],
               "untold": [{"from": lo_sha, "to": hi_sha,
                           "reason": f"cannot tell whether they differ by {min_step * 100:g} "
                                     "% or more (unknown at --max-repeat, or not testable)"}
                          for lo_sha, hi_sha in untold],
               "reason": None if found else "no step found between the two revisions"})
        return 0 if found else 1
    for sha, v in found:
        print(f"step at {repo.subject(sha)} ({sha}): median {show(v.median_a)} -> "
              f"{show(v.median_b)}, {v.change * 100:+.1f} % ({v.describe()})")
    for lo_sha, hi_sha in untold:
        print(f"cannot tell whether {lo_sha[:12]} and {hi_sha[:12]} differ by "
              f"{min_step * 100:g} % or more (unknown at --max-repeat, or not testable)")
    print(f"{len(found)} step{'s' * (len(found) != 1)} between {good[:12]} and {bad[:12]}")
    return 0 if found else 1
