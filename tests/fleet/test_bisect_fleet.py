"""`hoplab bisect run --fleet`: three benches (hoplab worker processes on this machine)
bisect a real git history of 17 commits whose lab's delay doubles at commit 12, each
commit checked out and built in the bench's own worktree, k = 3 commits a round."""

from __future__ import annotations

import json
import math
import re
import signal
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from hoplab.fleet.bisect.kary import Search
from hoplab.store import open_store
from tests.fleet.benches import all_idle, bench, bench_state, lab_namespaces, query, until
from tests.helpers.git_history import git, history
from tests.helpers.lab import HOPLAB, hoplab, new_lab_name

LAB = """name = "bisected"
[nodes.a]
[nodes.b]
[[links]]
between = ["a", "b"]
delay = "{delay}"
"""

# A figure cheap to measure and far above its noise: ping's RTT over a link whose
# delay (each way) is 5 ms up to commit 11 and 10 ms from commit 12 on.
EXPERIMENT = """lab = "lab.toml"
pause = "0s"
[[tests]]
name = "p"
kind = "ping"
from = "a"
to = "b"
duration = "0.5s"
interval = "20ms"
"""

COMMITS, STEP = 17, 12


@pytest.fixture
def benches() -> tuple[str, ...]:
    """Three bench names, random as every test's lab names: a bench's lab takes its name
    in /run/hoplab, which another run of these tests on this machine shares (fixed names
    met a lab of that run: 'lab bb1 is already up')."""
    return tuple(new_lab_name() for _ in range(3))


def test_three_benches_name_the_commit_in_fewer_rounds_than_binary_bisection(
        db: str, tmp_path: Path, benches: tuple[str, ...]) -> None:
    repo = tmp_path / "repo"
    shas = history(repo, COMMITS, lambda i: {
        "exp.toml": EXPERIMENT, "lab.toml": LAB.format(delay="10ms" if i >= STEP else "5ms")})
    builds = tmp_path / "builds.log"
    with ExitStack() as stack:
        procs = [stack.enter_context(bench(db, name, "--label", "site=t"))
                 for name in benches]
        all_idle(db, benches, procs)
        got = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                     "--bad", "main", "--db", db, "--fleet", "--where", "site=t",
                     "--metric", "rtt_median", "--max-repeat", "5",
                     "--build", f'echo "$HOPLAB_COMMIT $(git rev-parse HEAD) $PWD" >> {builds}',
                     timeout=300)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=60) for p in procs]
    assert got.returncode == 0, got.stdout + got.stderr
    assert codes == [0, 0, 0]
    out = got.stdout

    # The commit, as local bisect names it, in the rounds kary's arithmetic gives:
    # ceil(log4(16)) = 2 rounds of 3 commits, where binary bisection takes log2(16) = 4.
    first = re.search(r"^first bad commit: \w+ change (\d+) \((\w+)\) in (\d+) steps "
                      r"\((\d+) rounds\)$", out, re.M)
    assert first, out
    assert first.group(2) == shas[STEP - 1] and first.group(1) == str(STEP)
    n = COMMITS - 1
    rounds = math.ceil(math.log(n, len(benches) + 1) - 1e-9)
    assert (rounds, math.ceil(math.log2(n))) == (2, 4)
    assert int(first.group(4)) == rounds and int(first.group(3)) == rounds * len(benches)
    assert re.findall(r"^round \d+: 3 commits on 3 benches$", out, re.M) == \
        [f"round {r}: 3 commits on 3 benches" for r in (1, 2)]
    # The commits each round measured are kary's probes, and every answer is the truth.
    search = Search(n)
    for _ in range(rounds):
        probes = search.probes(len(benches))
        search.answer({i: int(i + 1 >= STEP) for i in probes})
    probed = {shas[i] for answers in search.rounds for i in answers}
    steps = re.findall(r"^step \d+: \w+ change (\d+): (good|bad), 5 runs \(5 new\), "
                       r"median [\d.]+ ms \([+-][\d.]+ % vs good\), bench (\w+)$", out, re.M)
    assert len(steps) == 6, out
    assert {shas[int(c) - 1] for c, _, _ in steps} == probed
    assert all((int(c) >= STEP) == (word == "bad") for c, word, _ in steps), out
    assert {on for _, _, on in steps} <= set(benches), out
    medians = [float(m) for m in re.findall(r"median ([\d.]+) ms \(5 runs", out)]
    assert 10 <= medians[0] < 11 and 20 <= medians[1] < 21, out

    # Every run is stored with its commit and its bench; each commit was checked out and
    # built once, in a worktree of a bench's own, which is gone.
    with open_store(db, read_only=True) as store:
        runs = store.list_runs({"experiment": "exp"}, figures=False)
    measured = {shas[0], shas[-1], *probed}
    assert len(runs) == 5 * len(measured)
    assert {r.status for r in runs} == {"ok"}
    assert {r.labels["commit"] for r in runs} == measured
    assert {r.labels["bench"] for r in runs} == set(benches)
    assert {r.labels["site"] for r in runs} == {"t"}
    built = [line.split() for line in builds.read_text().splitlines()]
    assert sorted(c for c, _, _ in built) == sorted(measured)
    assert all(c == head and Path(d) != repo for c, head, d in built)
    assert not any(Path(d).exists() for _, _, d in built)
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert not any(lab_namespaces(name) for name in benches)


def test_a_sqlite_store_is_refused_naming_postgresql(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = history(repo, 2, lambda i: {"exp.toml": EXPERIMENT})
    got = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                 "--bad", shas[1], "--db", str(tmp_path / "runs.db"), "--fleet")
    assert got.returncode == 2, got.stdout + got.stderr
    assert "PostgreSQL" in got.stderr and "docs/fleet.md" in got.stderr
    assert not (tmp_path / "runs.db").exists()


def test_a_commit_whose_build_fails_leaves_a_range_and_names_no_commit(
        db: str, tmp_path: Path, benches: tuple[str, ...]) -> None:
    """4 commits on 2 benches, the delay doubling at commit 3, whose build fails: one
    round measures commits 2 and 3, 3 cannot be told (125), so the first bad commit is
    3 or 4 and none is named (exit 1), in the JSON document too."""
    repo = tmp_path / "repo"
    shas = history(repo, 4, lambda i: {
        "exp.toml": EXPERIMENT, "lab.toml": LAB.format(delay="10ms" if i >= 3 else "5ms")})
    with ExitStack() as stack:
        procs = [stack.enter_context(bench(db, name)) for name in benches[:2]]
        all_idle(db, benches[:2], procs)
        got = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                     "--bad", shas[-1], "--db", db, "--fleet", "--json",
                     "--metric", "rtt_median", "--max-repeat", "5",
                     "--build", f'test "$HOPLAB_COMMIT" != {shas[2]}', timeout=300)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=60) for p in procs]
    assert got.returncode == 1, got.stdout + got.stderr
    assert codes == [0, 0]
    doc = json.loads(got.stdout)
    assert doc["first_bad"] is None
    assert doc["rounds"] == [{"benches": 2, "commits": shas[1:3]}]
    assert (doc["last_good"], doc["bad_bound"]) == (shas[1], shas[3])
    assert [(s["commit"], s["answer"]) for s in doc["steps"]] == [(shas[1], 0), (shas[2], 125)]
    assert f"build of {shas[2][:12]} failed" in doc["steps"][1]["reason"]
    assert "only commits that could not be told lie between" in doc["reason"]
    with open_store(db, read_only=True) as store:
        runs = store.list_runs({"experiment": "exp"}, figures=False)
    assert {r.labels["commit"] for r in runs} == {shas[0], shas[1], shas[3]}


def test_no_bench_with_the_labels_is_said_before_anything_is_queued(
        db: str, tmp_path: Path, benches: tuple[str, ...]) -> None:
    repo = tmp_path / "repo"
    shas = history(repo, 2, lambda i: {"exp.toml": EXPERIMENT})
    with bench(db, benches[0], "--label", "site=t") as proc:
        until("the bench idle", lambda: bench_state(db, benches[0]) == "idle")
        got = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                     "--bad", shas[1], "--db", db, "--fleet", "--where", "site=lab2")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert got.returncode == 2, got.stdout + got.stderr
    assert "no bench with --label site=lab2 is serving this store" in got.stderr
    assert query(db, "SELECT id FROM procrastinate_jobs") == []


def test_the_driver_needs_no_root_the_benches_measure() -> None:
    from hoplab.cli.main import build_parser

    argv = ["bisect", "run", "exp.toml", "--repo", ".", "--good", "a", "--bad", "b"]
    assert build_parser(["bisect"]).parse_args(argv).needs_root
    assert not build_parser(["bisect"]).parse_args([*argv, "--fleet"]).needs_root


def test_ctrl_c_cancels_the_jobs_still_waiting(db: str, tmp_path: Path,
                                              benches: tuple[str, ...]) -> None:
    """One bench: good's runs under way, bad's waiting; Ctrl-C stops the driver (130)
    and its waiting job is cancelled; the bench finishes good's and serves on."""
    repo = tmp_path / "repo"
    shas = history(repo, 3, lambda i: {"exp.toml": EXPERIMENT, "lab.toml": LAB.format(
        delay="5ms")})
    with bench(db, benches[0]) as worker:
        until("the bench idle", lambda: bench_state(db, benches[0]) == "idle")
        driver = subprocess.Popen(
            [*HOPLAB, "bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
             "--bad", shas[-1], "--db", db, "--fleet", "--max-repeat", "5"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # As from a terminal: a test run in the background of a shell inherits
            # SIGINT ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            until("one job running, one waiting", lambda: sorted(
                s for (s,) in query(db, "SELECT status::text FROM procrastinate_jobs"))
                == ["doing", "todo"])
            driver.send_signal(signal.SIGINT)
            _, err = driver.communicate(timeout=60)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.communicate()
        assert driver.returncode == 130, err
        until("the running job done", lambda: sorted(
            s for (s,) in query(db, "SELECT status::text FROM procrastinate_jobs"))
            == ["cancelled", "succeeded"])
        until("the bench idle again", lambda: bench_state(db, benches[0]) == "idle")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0


def test_a_build_that_never_ends_is_killed_and_its_commit_cannot_be_told(
        db: str, tmp_path: Path, benches: tuple[str, ...]) -> None:
    """As above, but commit 3's build hangs: past --build-timeout its process group is
    killed, the commit is 125, and the bench is free again (it measures no more, and
    stops when told)."""
    repo = tmp_path / "repo"
    shas = history(repo, 4, lambda i: {
        "exp.toml": EXPERIMENT, "lab.toml": LAB.format(delay="10ms" if i >= 3 else "5ms")})
    pids = tmp_path / "pids"
    hang = f'if [ "$HOPLAB_COMMIT" = {shas[2]} ]; then sleep 100000 & echo $! > {pids}; wait; fi'
    with ExitStack() as stack:
        procs = [stack.enter_context(bench(db, name)) for name in benches[:2]]
        all_idle(db, benches[:2], procs)
        got = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                     "--bad", shas[-1], "--db", db, "--fleet", "--json",
                     "--metric", "rtt_median", "--max-repeat", "5",
                     "--build", hang, "--build-timeout", "3", timeout=300)
        until("both benches idle again",
              lambda: all(bench_state(db, name) == "idle" for name in benches[:2]))
        for p in procs:
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=60) for p in procs]
    assert got.returncode == 1, got.stdout + got.stderr
    assert codes == [0, 0]
    doc = json.loads(got.stdout)
    assert [(s["commit"], s["answer"]) for s in doc["steps"]] == [(shas[1], 0), (shas[2], 125)]
    assert f"build of {shas[2][:12]} did not finish in 3 s (--build-timeout)" in \
        doc["steps"][1]["reason"]
    sleeper = int(pids.read_text())
    until("the build's sleep is gone", lambda: not _running(sleeper))


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
