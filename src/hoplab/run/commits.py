"""Measuring commits for bisection: the experiment as it is in a checkout, run in
batches labelled commit=SHA, with every run stored, so that a second bisection over
the same range reuses what the first measured.

The verdicts are analysis/adaptive.py's; this module only decides how many runs to
take (its schedule) and takes them. run/bisect.py searches a range with it.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import hoplab.kinds  # noqa: F401  (the loader asks the registry of kinds)
from hoplab.analysis import adaptive, verdicts
from hoplab.analysis.adaptive import Classification, Verdict
from hoplab.analysis.verdicts import word
from hoplab.errors import HoplabError, UsageError
from hoplab.lab.signals import terminate_as_interrupt
from hoplab.record import RunRecord
from hoplab.run.experiment import ExperimentRunner, RunSink
from hoplab.spec.experiment import Experiment
from hoplab.spec.experiment_loader import load_experiment
from hoplab.store import Store

Say = Callable[[str], None]
LAB_PREFIX = "bis"
# --build-timeout's default: a kernel or firmware build from a warm tree fits in it; a
# build that hangs (waiting for input, a lock) is killed and the commit skipped.
BUILD_TIMEOUT_S = 3600.0
# After SIGTERM, how long the build's process group has to end before SIGKILL.
BUILD_GRACE_S = 5.0


class CannotTest(HoplabError):
    """This commit cannot be measured (its experiment does not load, its build or its
    runs fail): git bisect skips it (125)."""


@dataclass(frozen=True)
class Target:
    """What is measured at each commit and how."""

    experiment: str                 # path of the experiment file inside the repository
    metric: str
    labels: dict[str, str]          # --label KEY=VALUE: stored with the runs, and selects them
    build: str | None               # shell command run in the checkout before measuring
    max_repeat: int
    # --set overrides applied to the experiment at each commit (a fleet bench's own
    # facts, from its bench file: its devices' addresses, its NICs).
    sets: tuple[str, ...] = ()
    # Seconds the build may take; past them it is killed and the commit cannot be told.
    build_timeout: float = BUILD_TIMEOUT_S


def load_at(checkout: Path, target: Target, sha: str) -> Experiment:
    """The experiment as it is in `checkout`, its runs labelled commit=SHA. It must have
    one variant and one test: bisection follows one figure."""
    path = checkout / target.experiment
    if not path.is_file():
        raise CannotTest(f"{target.experiment} does not exist at {sha[:12]}")
    exp = load_experiment(path, target.sets)
    tests = [t.name for v in exp.variants for t in v.tests]
    if len(exp.variants) != 1 or len(tests) != 1:
        raise UsageError(
            f"{target.experiment}: bisection follows one figure, so the experiment needs one "
            f"variant and one test; it has {len(exp.variants)} variant(s) and tests "
            f"{', '.join(sorted(set(tests)))}")
    return dataclasses.replace(exp, labels={**exp.labels, **target.labels, "commit": sha})


def stored(store: Store, exp: Experiment, sha: str, target: Target) -> list[RunRecord]:
    """The finished runs already stored for this experiment, test and commit."""
    test = exp.variants[0].tests[0].name
    filters = {**target.labels, "experiment": exp.name, "test": test, "commit": sha,
               "status": "ok"}
    return [store.get_run(s.id, series=False) for s in store.list_runs(filters)
            if s.id is not None]


def build(checkout: Path, command: str, sha: str, say: Say,
          timeout: float = BUILD_TIMEOUT_S) -> None:
    """Run the user's build command (a shell command line they wrote) in the checkout,
    in a process group of its own; non-zero, or still running after `timeout` seconds
    (its whole group is then killed): this commit cannot be tested."""
    import signal

    say(f"  build {sha[:12]}: {command}")
    proc = subprocess.Popen(["sh", "-c", command], cwd=checkout, start_new_session=True,
                            env={**os.environ, "HOPLAB_COMMIT": sha})
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        # Whatever ended the wait (the timeout, Ctrl-C), nothing of the build outlives it.
        _kill_group(proc, signal.SIGTERM)
    if code is None:
        raise CannotTest(f"build of {sha[:12]} did not finish in {timeout:g} s "
                         f"(--build-timeout): its processes were killed: {command}")
    if code != 0:
        raise CannotTest(f"build of {sha[:12]} failed (exit {code}): {command}")


def _kill_group(proc: subprocess.Popen[bytes], first: int) -> None:
    """SIGTERM, then SIGKILL after BUILD_GRACE_S, to the build's process group (its
    session: `sh` and all it started), and reap `sh`."""
    import signal

    for sig, grace in ((first, BUILD_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break   # the group is empty: everything in it has ended
        if grace is None:
            break
        try:
            proc.wait(timeout=grace)
            os.killpg(proc.pid, 0)  # sh ended: did something it started stay?
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            break
    proc.wait()


class Measurer:
    """Takes runs of commits into one store, each batch in one `hoplab run`'s worth."""

    def __init__(self, store: Store, target: Target, say: Say,
                 checkout: Callable[[str], Path], *, stamp: Mapping[str, str] | None = None,
                 lab_name: str | None = None, sink: RunSink | None = None) -> None:
        self.store = store
        # Where runs taken are saved (a fleet bench's fences them); read from `store`.
        self.sink: RunSink = sink or store
        # Labels every run taken gets but no selection asks for (a fleet bench's name):
        # runs of the same commit taken elsewhere count as much.
        self.stamp = dict(stamp or {})
        self.lab_name = lab_name        # None: bis + hex, new for each batch
        self.target = target
        self.say = say
        self._checkout = checkout       # puts a commit's tree in place; returns its path
        self._built: set[str] = set()
        self.taken: dict[str, int] = {}  # runs this process took per commit (not reused)

    def runs(self, sha: str, at_least: int) -> list[RunRecord]:
        """At least `at_least` finished runs of commit `sha`: those stored, topped up."""
        exp: Experiment | None = None
        have: list[RunRecord] = []
        try:
            tree = self._checkout(sha)
            exp = load_at(tree, self.target, sha)
        except CannotTest:
            raise
        except UsageError as e:
            raise CannotTest(f"the experiment does not load at {sha[:12]}: {e}") from e
        have = stored(self.store, exp, sha, self.target)
        missing = at_least - len(have)
        if missing <= 0:
            return have
        if self.target.build and sha not in self._built:
            build(tree, self.target.build, sha, self.say, self.target.build_timeout)
            self._built.add(sha)
        self.say(f"  {sha[:12]}: {len(have)} stored, running {missing} more")
        self._run(dataclasses.replace(exp, repeat=missing,
                                      labels={**self.stamp, **exp.labels}))
        self.taken[sha] = self.taken.get(sha, 0) + missing
        have = stored(self.store, exp, sha, self.target)
        if len(have) < at_least:
            raise CannotTest(f"runs of {sha[:12]} failed ({len(have)} of {at_least} finished;"
                             f" `hoplab runs --filter commit={sha}` shows why)")
        return have

    def _run(self, exp: Experiment) -> None:
        # As `hoplab run`: SIGTERM and SIGHUP unwind like Ctrl-C (the run under way is
        # stored as interrupted, the lab taken down), and once one came, no other cuts
        # that short. Labs are named bis + hex, so a leftover one can be told.
        with terminate_as_interrupt(shield_after_first=True):
            ExperimentRunner(exp, self.sink,
                             lab_name=self.lab_name or LAB_PREFIX + secrets.token_hex(4)).run()


def check(measurer: Measurer, sha: str, good: Sequence[RunRecord], bad: Sequence[RunRecord]
          ) -> tuple[Classification, int]:
    """Like good, like bad or cannot tell, with adaptive repetitions: a batch, a verdict
    against each side, more repetitions while unknown, up to the cap. Returns the
    answer and the repetitions it rests on."""
    metric, cap = measurer.target.metric, measurer.target.max_repeat
    ends = adaptive.judge_runs(good, bad, metric, bound=None)
    half = adaptive.half_step(ends.a, ends.b)
    bound_good = half / abs(ends.median_a) if ends.median_a else float("inf")
    bound_bad = half / abs(ends.median_b) if ends.median_b else float("inf")
    n = adaptive.next_repetitions(0, cap) or cap
    while True:
        runs = measurer.runs(sha, n)
        vg = adaptive.judge_runs(good, runs, metric, bound=bound_good)
        vb = adaptive.judge_runs(bad, runs, metric, bound=bound_bad)
        found = adaptive.classify(vg, vb)
        measurer.say(f"  {sha[:12]}: {len(runs)} runs: vs good {word(vg.verdict)} "
                     f"({vg.describe()}); vs bad {word(vb.verdict)} ({vb.describe()})")
        nxt = adaptive.next_repetitions(len(runs), cap)
        if found.final or nxt is None:
            return found, len(runs)
        n = nxt


def apart(measurer: Measurer, a: str, b: str, bound: float | None = None
          ) -> tuple[list[RunRecord], list[RunRecord], Verdict]:
    """Runs of commits a and b, topped up together until they differ (p < 0.01), are the
    same within `bound` (relative; None: never) or the cap is reached: the verdict says
    which."""
    metric, cap = measurer.target.metric, measurer.target.max_repeat
    n = adaptive.next_repetitions(0, cap) or cap
    while True:
        ra, rb = measurer.runs(a, n), measurer.runs(b, n)
        v = adaptive.judge_runs(ra, rb, metric, bound=bound)
        measurer.say(f"  {a[:12]} vs {b[:12]}: {word(v.verdict)} ({v.describe()})")
        nxt = adaptive.next_repetitions(min(len(ra), len(rb)), cap)
        if v.verdict != verdicts.UNCLEAR or nxt is None:
            return ra, rb, v
        n = nxt


def references(measurer: Measurer, good: str, bad: str) -> tuple[list[RunRecord],
                                                                   list[RunRecord]]:
    """The runs every commit is judged against: good's and bad's, at least twice the
    first batch (10) each. Ten keep one disturbed run (a loaded machine's) from
    deciding: the bootstrap median of 5 runs lands on a single outlier 6 % of the
    time, of 10 runs 0.2 %."""
    n = min(measurer.target.max_repeat, 2 * adaptive.FIRST_BATCH)
    return measurer.runs(good, n), measurer.runs(bad, n)
