"""`hoplab bisect run --fleet`: bisection with k commits a round on k benches.

The driver finds the commits on its own machine (run/git.py), has the range's ends
measured on the fleet (good and bad at once, topped up together as run/commits.apart
tops them up), refuses as local bisection does when they do not differ beyond the
noise, then asks fleet/kary.py's search for up to k commits a round, k being the
benches matching --where that are idle (or busy with this bisection's last round),
queues one "measure commit" job per commit (hoplab.fleet.bisect_jobs), waits for their
answers and narrows the range, round after round.

Its waiting jobs are cancelled whenever it stops; a job a bench cannot run at all (the
repository or the commit missing there) stops it with that bench's error.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from hoplab.errors import UsageError
from hoplab.fleet.bisect_jobs import TASK, CommitJob
from hoplab.run.bisect import Bisected, Outcome, Range, Refused
from hoplab.run.commits import Measurer, Say, Target

if TYPE_CHECKING:
    from pathlib import Path

    from hoplab.analysis.adaptive import Verdict
    from hoplab.record import RunRecord
    from hoplab.store import Store

# How often the driver looks for its jobs' answers, and for a bench still serving them.
POLL_S = 0.2
ALIVE_S = 5.0


@dataclass(frozen=True)
class FleetBisected(Bisected):
    """Bisected, round by round: the commits each round measured (their steps in that
    order), the benches it had, and the search's end: 0 (first_bad found), 125 (only
    commits that could not be told lie between last_good and first_bad_bound) or 128
    (it gave up after kary.GIVE_UP of them)."""

    rounds: list[list[str]]
    benches: list[int]
    code: int
    last_good: str
    bad_bound: str


class Fleet:
    """The driver's side of the queue: one bisection's jobs and their answers."""

    def __init__(self, db_url: str | None, where: Mapping[str, str], say: Say) -> None:
        import json

        from hoplab.fleet.app import make_app
        from hoplab.fleet.routes import queue_of
        from hoplab.fleet.submit import connect

        self.db_url, self.where, self.say = db_url, dict(where), say
        self.bisection = secrets.token_hex(6)
        self.jobs: dict[int, str] = {}      # job id -> commit
        self.conn = connect(db_url)  # the fleet's tables made, the answers' too
        self.queue = queue_of((), self.where)
        self.conn.execute("INSERT INTO hoplab_fleet_routes (queue, benches, where_labels) "
                          "VALUES (%s, '[]', %s) ON CONFLICT (queue) DO NOTHING",
                          (self.queue, json.dumps(dict(sorted(self.where.items())))))
        self.app = make_app(db_url).open()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            # Waiting jobs of a bisection that stopped would only keep benches busy.
            self.conn.execute("UPDATE procrastinate_jobs SET status = 'cancelled' WHERE "
                              "status = 'todo' AND task_name = %s AND args->>'bisection' = %s",
                              (TASK, self.bisection))
        finally:
            self.app.close()
            self.conn.close()

    def benches(self) -> int:
        """k: the benches matching --where that are idle or busy with this bisection (at
        least 1 while one serves, a job waiting for it); UsageError when none serves."""
        from hoplab.fleet.routes import matches
        from hoplab.fleet.status import fleet_status

        live = [b for b in fleet_status(self.db_url, experiments=0).benches
                if b.state in ("idle", "busy")
                and matches(b.name.split("#")[0], b.labels, (), self.where)]
        if not live:
            said = " ".join(f"--label {k}={v}" for k, v in self.where.items())
            raise UsageError(f"no bench{' with ' + said if said else ''} is serving this "
                             f"store: start one (`hoplab worker --bench NAME {said}`); see "
                             "docs/fleet.md")
        return max(1, sum(b.state == "idle" or b.current_job in self.jobs for b in live))

    def measure(self, jobs: Sequence[CommitJob]) -> dict[str, dict[str, Any]]:
        """Queue the jobs (one per commit) and wait for every answer: commit -> result
        (bisect_jobs's document, and the bench that measured it)."""
        ids = self.app.configure_task(TASK, queue=self.queue).batch_defer(
            *[dataclasses.replace(j, bisection=self.bisection).args() for j in jobs])
        self.jobs.update(zip(ids, (j.commit for j in jobs), strict=True))
        pending, results = set(ids), {}
        alive = time.monotonic()
        while pending:
            for job_id, bench, result in self.conn.execute(
                    "SELECT job_id, bench, result FROM hoplab_fleet_bisect_results "
                    "WHERE job_id = ANY(%s)", (sorted(pending),)).fetchall():
                results[self.jobs[job_id]] = {**dict(result), "bench": str(bench)}
                pending.discard(job_id)
            self._failed(pending)
            if pending and time.monotonic() - alive > ALIVE_S:
                self.benches()
                alive = time.monotonic()
            if pending:
                time.sleep(POLL_S)
        return results

    def _failed(self, pending: set[int]) -> None:
        rows = self.conn.execute(
            "SELECT j.id, j.status::text, e.bench, e.error FROM procrastinate_jobs j LEFT "
            "JOIN hoplab_fleet_errors e ON e.job_id = j.id WHERE j.id = ANY(%s) AND "
            "j.status IN ('failed', 'cancelled')", (sorted(pending),)).fetchall()
        for job_id, status, bench, error in rows:
            sha = self.jobs[job_id][:12]
            if status == "cancelled":
                raise UsageError(f"the job measuring {sha} was cancelled")
            raise UsageError(f"bench {bench or '?'} could not measure {sha}: {error}")


class FleetMeasurer(Measurer):
    """Measurer.runs on the fleet: the runs a bench took, read back from the store. The
    commits in `together` are topped up at once, each on its own bench."""

    def __init__(self, store: Store, target: Target, say: Say, fleet: Fleet,
                 template: CommitJob) -> None:
        super().__init__(store, target, say, checkout=_nowhere)
        self.fleet, self.template = fleet, template
        self.together: tuple[str, ...] = ()
        self._have: dict[str, list[RunRecord]] = {}

    def runs(self, sha: str, at_least: int) -> list[RunRecord]:
        from hoplab.run.commits import CannotTest

        short = [s for s in dict.fromkeys((sha, *self.together))
                 if len(self._have.get(s, [])) < at_least]
        if short:
            self.say(f"  measuring {', '.join(s[:12] for s in short)} on the fleet: at "
                     f"least {at_least} runs each")
            found = self.fleet.measure([dataclasses.replace(self.template, commit=s,
                                                            at_least=at_least) for s in short])
            for s, doc in found.items():
                if "cannot" in doc:
                    raise CannotTest(f"{doc['cannot']} (bench {doc['bench']})")
                self._have[s] = [self.store.get_run(i, series=False) for i in doc["runs"]]
                self.taken[s] = self.taken.get(s, 0) + int(doc["new_runs"])
        return self._have[sha]


def _nowhere(sha: str) -> Path:
    raise AssertionError(f"the driver checks out nothing ({sha[:12]})")


def bisect_fleet(rng: Range, target: Target, url: str, where: Mapping[str, str],
                 say: Say) -> Outcome:
    """Measure the ends on the fleet, then search the range k commits a round."""
    from hoplab.analysis.adaptive import judge_runs
    from hoplab.run.commits import CannotTest, apart, references
    from hoplab.store import open_store

    repo = rng.repo
    target = dataclasses.replace(target, labels={**target.labels, **where})
    template = CommitJob("", "", str(repo.top), rng.experiment, target.metric,
                         dict(target.labels), target.build, target.max_repeat,
                         build_timeout=target.build_timeout)
    with Fleet(url, where, say) as fleet, open_store(url) as store:
        fleet.benches()  # none serving: said before anything is queued
        measurer = FleetMeasurer(store, target, say, fleet, template)
        measurer.together = (rng.good, rng.bad)
        say(f"measuring good {repo.subject(rng.good)} and bad {repo.subject(rng.bad)} on "
            f"the fleet")
        try:
            _, _, ends = apart(measurer, rng.good, rng.bad)
            if ends.verdict != "different":
                return Refused(rng.good, rng.bad, ends, _subjects(rng))
            good, bad = references(measurer, rng.good, rng.bad)
        except CannotTest as e:
            raise UsageError(f"cannot measure an end of the range: {e}") from e
        ends = judge_runs(good, bad, target.metric, bound=None)
        template = dataclasses.replace(template, good=[r.id for r in good if r.id],
                                       bad=[r.id for r in bad if r.id])
        return _search(rng, fleet, template, ends, say)


def _subjects(rng: Range, *more: str) -> dict[str, str]:
    return {sha: rng.repo.subject(sha) for sha in (rng.good, rng.bad, *more)}


def _search(rng: Range, fleet: Fleet, template: CommitJob, ends: Verdict, say: Say
            ) -> FleetBisected:
    from hoplab.fleet.kary import GOOD, Search

    commits = rng.repo.first_parents(rng.good, rng.bad)
    search = Search(len(commits) - 1)
    steps: list[dict[str, Any]] = []
    rounds: list[list[str]] = []
    benches: list[int] = []
    while not search.done:
        k = fleet.benches()
        probes = search.probes(k)
        shas = [commits[i] for i in probes]
        say(f"round {len(rounds) + 1}: {len(shas)} of {search.hi - search.lo - 1} commits "
            f"left on {k} bench{'es' * (k != 1)}: {', '.join(s[:12] for s in shas)}")
        found = fleet.measure([dataclasses.replace(template, commit=s) for s in shas])
        for s in shas:
            say(f"  {s[:12]} on bench {found[s]['bench']}: {found[s]['word']} "
                f"({found[s]['runs']} runs)")
        search.answer({i: int(found[commits[i]]["answer"]) for i in probes})
        steps += [found[s] for s in shas]
        rounds.append(shas)
        benches.append(k)
    code, lo, hi = search.result()
    first = commits[hi] if code == GOOD else None
    return FleetBisected(rng.good, rng.bad, ends,
                         _subjects(rng, commits[lo], commits[hi], *(s["commit"] for s in steps)),
                         steps, first, rounds, benches, code, commits[lo], commits[hi])
