"""Bisecting a range of commits by a measured figure: git bisect that knows noise.

`bisect` measures the good and the bad commit and refuses when they do not differ
beyond the noise; then it drives `git bisect run` with `hoplab bisect check` as the
script (one commit at a time, `check_head` below), or, for every step, splits the
range itself. The repository always ends as it began. run/commits.py takes the runs,
analysis/adaptive.py gives the verdicts, run/git.py talks to git.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoplab.analysis.adaptive import Classification, Verdict, judge_runs
from hoplab.analysis.select import select_pair
from hoplab.errors import UsageError
from hoplab.lab.signals import terminate_as_interrupt
from hoplab.run.commits import CannotTest, Measurer, Say, Target, apart, check, references
from hoplab.run.git import ABORT, SKIP, Repo, git, head, toplevel
from hoplab.store import open_store
from hoplab.store.url import redact

# Commits answered "cannot tell" after which `bisect run` stops git: each costs
# --max-repeat runs, and git would skip its way through the whole range.
GIVE_UP = 3

# The script git bisect runs at each commit: given the selections of good's and bad's
# runs and the file it records its step in, its argv and what it adds to its environment.
Script = Callable[[str, str, str], tuple[list[str], dict[str, str]]]
Step = dict[str, Any]      # what `check` recorded at one commit (one JSON line)


@dataclass(frozen=True)
class Range:
    """The commits to bisect, checked: GOOD an ancestor of BAD in a clean repository
    with no bisection under way, the experiment a file inside it."""

    repo: Repo
    good: str
    bad: str
    experiment: str                 # relative to the repository's top

    @classmethod
    def of(cls, repo_dir: str, good: str, bad: str, experiment: str) -> Range:
        repo = Repo(repo_dir)
        g, b = repo.commit(good, "--good"), repo.commit(bad, "--bad")
        if not repo.is_ancestor(g, b):
            raise UsageError(f"--good {good} is not an ancestor of --bad {bad}")
        path = Path(experiment)
        if path.is_absolute():
            top = repo.top.resolve()
            if not path.resolve().is_relative_to(top):
                raise UsageError(f"{experiment} is not in {repo.top}: the experiment is "
                                 "read at each commit, so it must be in the repository")
            path = path.resolve().relative_to(top)
        return cls(repo, g, b, str(path))


@dataclass(frozen=True)
class Outcome:
    """What a bisection found. good and bad are the SHAs as resolved before git
    started (a revision such as HEAD~7 names another commit while one is checked out)."""

    good: str
    bad: str
    ends: Verdict                   # good's runs against bad's
    subjects: dict[str, str]        # 'abc1234 subject' of every commit named here


@dataclass(frozen=True)
class Refused(Outcome):
    """Good and bad do not differ beyond the noise: no commit is named."""


@dataclass(frozen=True)
class Bisected(Outcome):
    """git bisect's walk: each commit it visited, and the first bad one if it found it."""

    steps: list[Step]
    first_bad: str | None


@dataclass(frozen=True)
class EveryStep(Outcome):
    """--all: each commit at which the figure stepped, with good-side and bad-side
    verdict, and the ranges whose ends could not be told apart."""

    found: list[tuple[str, Verdict]]
    untold: list[tuple[str, str]]
    min_step: float


def bisect(rng: Range, target: Target, url: str, script: Script, say: Say, *,
           every: bool = False, min_step: float = 0.02) -> Outcome:
    """Measure the ends, then find the first bad commit (or, `every`, each step). The
    repository is back on its branch, bisect state reset, whatever happens."""
    repo = rng.repo
    with open_store(url) as store:
        measurer = Measurer(store, target, say, checkout=repo.checkout)
        try:
            with terminate_as_interrupt():
                say(f"measuring good {repo.subject(rng.good)} and bad {repo.subject(rng.bad)}")
                try:
                    _, _, ends = apart(measurer, rng.good, rng.bad)
                    if ends.verdict != "different":
                        return Refused(rng.good, rng.bad, ends, _subjects(repo, rng))
                    if every:
                        return _every_step(rng, measurer, ends, min_step)
                    return _git_bisect(rng, measurer, url, script, say)
                except CannotTest as e:
                    raise UsageError(f"cannot measure an end of the range: {e}") from e
        finally:
            repo.restore()


def _subjects(repo: Repo, rng: Range, *more: str | None) -> dict[str, str]:
    return {sha: repo.subject(sha) for sha in (rng.good, rng.bad, *more) if sha}


def _git_bisect(rng: Range, measurer: Measurer, url: str, script: Script, say: Say
                ) -> Bisected:
    g, b = references(measurer, rng.good, rng.bad)
    ends = judge_runs(g, b, measurer.target.metric, bound=None)
    exp, test = g[0].experiment, g[0].test
    labels = "".join(f",{k}={v}" for k, v in measurer.target.labels.items())
    fd, steps_file = tempfile.mkstemp(prefix="hoplab-bisect-", suffix=".jsonl")
    os.close(fd)
    try:
        argv, env = script(f"experiment={exp},test={test},commit={rng.good}{labels}",
                           f"experiment={exp},test={test},commit={rng.bad}{labels}",
                           steps_file)
        # git echoes its script's command line, and the script's errors come through:
        # the store's password is masked in whatever is shown.
        first = rng.repo.bisect_run(rng.good, rng.bad, argv, env,
                                    lambda line: say("git: " + redact(line, url)))
        steps = [json.loads(line) for line in Path(steps_file).read_text().splitlines()
                 if line.strip()]
    finally:
        Path(steps_file).unlink(missing_ok=True)
    visited = [s["commit"] for s in steps]
    return Bisected(rng.good, rng.bad, ends, _subjects(rng.repo, rng, first, *visited),
                    steps, first)


def _every_step(rng: Range, measurer: Measurer, ends: Verdict, min_step: float) -> EveryStep:
    """Split the range at its middle commit while its ends differ, down to adjacent
    commits (along the first-parent line)."""
    commits = rng.repo.first_parents(rng.good, rng.bad)
    found: list[tuple[str, Verdict]] = []
    untold: list[tuple[str, str]] = []
    todo = [(0, len(commits) - 1)]
    while todo:
        lo, hi = todo.pop(0)
        try:
            v = apart(measurer, commits[lo], commits[hi], bound=min_step)[2]
        except CannotTest as e:
            measurer.say(f"cannot test: {e}")
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
    return EveryStep(rng.good, rng.bad, ends,
                     _subjects(rng.repo, rng, *(sha for sha, _ in found)),
                     found, untold, min_step)


# --- one commit: `hoplab bisect check` -------------------------------------------------


def check_head(target: Target, url: str, good: str, bad: str, steps_file: str | None,
               say: Say) -> int:
    """Measure the checked-out commit of the repository this process is in and answer
    as git bisect run reads it: 0 like the runs `good` selects, 1 like `bad`'s, 125
    cannot tell (also when the commit cannot be measured), 128 once GIVE_UP commits
    could not be told. Each answer is recorded in `steps_file` (one JSON line)."""
    try:
        return _check(target, url, good, bad, steps_file, say)
    except CannotTest as e:
        say(f"hoplab bisect check: cannot test this commit ({SKIP}): {e}")
        _record(steps_file, {"commit": _head(), "answer": SKIP, "word": "skipped",
                             "reason": str(e), "runs": 0})
        return SKIP


def _head() -> str | None:
    return head(Path.cwd())


def _check(target: Target, url: str, good_sel: str, bad_sel: str, steps_file: str | None,
           say: Say) -> int:
    here = Path.cwd()
    top = toplevel(here)
    sha = git(here, "rev-parse", "HEAD")
    untold = _untold(steps_file)
    if untold >= GIVE_UP:
        # git would go on skipping, commit after commit, each at --max-repeat runs; the
        # noise is too large for this step at these repetitions.
        say(f"hoplab bisect check: {untold} commits could not be told; giving up "
            f"(exit {ABORT}: git bisect run stops)")
        _record(steps_file, {"commit": sha, "answer": ABORT, "word": "gave up",
                             "reason": f"{untold} commits could not be told", "runs": 0})
        return ABORT
    with open_store(url) as store:
        ids_good, ids_bad = select_pair(store, good_sel, bad_sel)
        good = [store.get_run(i, series=False) for i in ids_good]
        bad = [store.get_run(i, series=False) for i in ids_bad]
        measurer = Measurer(store, target, say, checkout=lambda _sha: top)
        found, n = check(measurer, sha, good, bad)
    say(f"hoplab bisect check: {sha[:12]} is {found.word} ({found.reason}; {n} runs)")
    _record(steps_file, step_record(sha, found, n, measurer.taken.get(sha, 0)))
    return found.answer


def _untold(path: str | None) -> int:
    if not path or not Path(path).exists():
        return 0
    return sum(json.loads(line).get("answer") == SKIP
               for line in Path(path).read_text().splitlines() if line.strip())


def step_record(sha: str, found: Classification, n: int, taken: int) -> Step:
    """What one commit's check answered, as `bisect run` reports it: git's steps and
    the fleet's (hoplab.fleet.bisect.jobs)."""
    return {"commit": sha, "answer": found.answer, "word": found.word, "reason": found.reason,
            "runs": n, "new_runs": taken, "median": found.vs_good.median_b,
            "vs_good": _pct(found.vs_good), "vs_bad": _pct(found.vs_bad),
            "power": found.vs_good.power.to_json()}


def _pct(v: Verdict) -> dict[str, Any]:
    return {"verdict": v.verdict, "change_pct": 100 * v.change, "p": v.p,
            "ci_pct": [100 * v.ci[0], 100 * v.ci[1]]}


def _record(path: str | None, step: Step) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(step) + "\n")
