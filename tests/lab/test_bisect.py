"""`hoplab bisect run` through the command line, on a repository the test makes: 32
commits of a lab file, where commit 19 lowers a link's rate and commit 9 changes
something irrelevant."""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from hoplab.store.store import open_store
from tests.helpers.git_history import git, history, store_levels
from tests.helpers.lab import HOPLAB, hoplab, lab_namespaces

pytestmark = pytest.mark.root

LAB = """name = "bisected"
[nodes.client]
[nodes.r1]
[nodes.server]
[[links]]
between = ["client", "r1"]
{extra}
[[links]]
between = ["r1", "server"]
rate = "{rate}"
{impair}
"""

# No pause between runs: nothing of a 1 s upload lingers in these queues.
EXPERIMENT = """lab = "lab.toml"
pause = "0s"
[[tests]]
name = "bulk"
kind = "tcp"
from = "client"
to = "server"
duration = "1s"
"""


def make_repo(repo: Path, before: str, after: str, impair: str = "", *, commits: int = 32,
              step: int = 19) -> list[str]:
    """32 commits; commit 19 changes the r1-server rate from `before` to `after`, commit
    9 writes out the client link's default queue length (an irrelevant change); the
    others touch a notes file. Returns the SHAs, commit 1 first."""
    def files(i: int) -> dict[str, str]:
        extra = "queue = 1000" if i >= 9 else ""     # the default queue length, written out
        return {"exp.toml": EXPERIMENT, "lab.toml": LAB.format(
            rate=after if i >= step else before, extra=extra, impair=impair)}
    return history(repo, commits, files)


@dataclass(frozen=True)
class Measured:
    """The 32-commit repository (100 -> 80 Mbit/s at commit 19) and a store holding ten
    runs of its first commit (ids 1-10) and ten of its last (ids 11-20), taken with
    `hoplab run` at each checkout and labelled commit=SHA, as docs/versions.md shows."""

    repo: Path
    shas: list[str]
    db: Path

    def copy(self, into: Path) -> tuple[Path, Path]:
        """A clone of the repository (same SHAs) and a copy of the store, for one test."""
        repo, db = into / "repo", into / "runs.db"
        subprocess.run(["git", "clone", "-q", str(self.repo), str(repo)], check=True)
        shutil.copyfile(self.db, db)
        return repo, db


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Measured:
    # The ends are measured once for the tests that bisect this history: a bisection
    # takes stored runs of a commit before measuring more (the second bisection below
    # shows it), and what each test proves is the steps between the ends. The ends'
    # own measuring and refusing are proven by the change inside the noise and by
    # tests/lab/test_nat_versions.py, which measure theirs.
    base = tmp_path_factory.mktemp("bisected")
    repo, db = base / "repo", base / "ends.db"
    shas = make_repo(repo, "100mbit", "80mbit")
    for sha in (shas[0], shas[-1]):
        git(repo, "checkout", "-q", sha)
        proc = hoplab("run", str(repo / "exp.toml"), "--repeat", "10", "--db", str(db),
                      "--set", f"labels.commit={sha}", timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    git(repo, "checkout", "-q", "main")
    return Measured(repo, shas, db)


def _runs(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("select count(*) from runs").fetchone()[0])


def _left_clean(repo: Path) -> None:
    assert not (repo / ".git" / "BISECT_START").exists()
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(repo, "status", "--porcelain") == ""


def test_bisect_names_the_commit_that_lowered_the_rate(measured: Measured,
                                                       tmp_path: Path) -> None:
    repo, db = measured.copy(tmp_path)
    shas = measured.shas
    args = ("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
            "--bad", "main", "--db", str(db), "--max-repeat", "10")
    ends = _runs(db)
    proc = hoplab(*args, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # The ends' stored runs were taken, not measured again; each step measured its commit.
    assert not re.search(rf"^ *({shas[0][:12]}|{shas[-1][:12]}): \d+ stored, running",
                         proc.stderr, re.M), proc.stderr
    first = re.search(r"first bad commit: (\w+) change (\d+) \((\w+)\) in (\d+) steps", out)
    assert first, out
    assert first.group(3) == shas[18] and first.group(2) == "19"
    steps = re.findall(r"^step \d+: \w+ change (\d+): (good|bad)", out, re.M)
    assert 1 <= len(steps) <= 7 and int(first.group(4)) == len(steps)
    # Every step's verdict is the truth: before commit 19 good, from it on bad.
    assert all((int(n) >= 19) == (word == "bad") for n, word in steps), out
    # The good and bad medians: TCP payload through 100 and 80 Mbit/s of 1514-byte
    # frames carrying 1448 bytes each (docs/lab-format.md: what a rate counts).
    medians = [float(m) for m in re.findall(r"median ([\d.]+) Mbit/s \(\d+ runs", out)]
    assert medians[0] == pytest.approx(100 * 1448 / 1514, rel=0.025), out
    assert medians[1] == pytest.approx(80 * 1448 / 1514, rel=0.025), out
    _left_clean(repo)

    # A second bisection over the same range measures nothing: every commit it visits
    # has its runs stored, labelled commit=SHA.
    before = _runs(db)
    again = hoplab(*args, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"({shas[18]})" in again.stdout
    assert _runs(db) == before > ends
    assert "(0 new)" in again.stdout and "new)" in again.stdout
    _left_clean(repo)


def test_a_change_inside_the_noise_names_no_commit(tmp_path: Path) -> None:
    # 3 % random loss and 20 ms of delay make 1 s of TCP goodput vary by several per
    # cent between repetitions, and loss, not the rate, limits it: a 3 % lower rate
    # cannot be told from the noise with 6 repetitions (the first batch of 5, then one
    # more a side: the adaptive top-up). (Should good and bad differ by chance, the
    # commits between cannot be told either, and after 3 of them it stops.)
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = make_repo(repo, "100mbit", "97mbit", impair='delay = "20ms"\nloss = 3')
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                  "--bad", shas[-1], "--db", str(db), "--max-repeat", "6", timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cannot decide" in proc.stdout and "first bad commit" not in proc.stdout
    assert "No commit is named" in proc.stdout or "no commit is named" in proc.stdout
    assert re.search(r"smallest change detectable with 6 vs 6 repetitions", proc.stdout)
    assert not any(sha[:7] in proc.stdout.split("cannot decide")[1] for sha in shas[1:-1])
    _left_clean(repo)


def test_ctrl_c_stops_the_check_takes_its_lab_down_and_resets_the_bisection(
        measured: Measured, tmp_path: Path) -> None:
    repo, db = measured.copy(tmp_path)
    shas = measured.shas
    proc = subprocess.Popen([*HOPLAB, "bisect", "run", "exp.toml", "--repo", str(repo),
                             "--good", shas[0], "--bad", "main", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # As from a terminal: a test run started in the background
                            # of a shell inherits SIGINT ignored.
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + 300
    for line in proc.stderr:
        seen.append(line)
        # The first check, run by git, is measuring its commit: the line a check prints
        # before its runs (the ends' runs are stored).
        if "stored, running" in line \
                and not line.strip().startswith((shas[0][:12], shas[-1][:12])):
            checked = line.strip()[:12]
            break
        assert time.monotonic() < deadline, "".join(seen)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + err
    _left_clean(repo)
    # The runs the check took are kept, labelled with its commit: as interrupted if one
    # was under way (the signal may also come between two runs), the others as ok; the
    # ends' runs are kept as they were.
    listed = hoplab("runs", "--db", str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [r["status"] for r in runs[:20]] == ["ok"] * 20, runs
    assert runs[20:] and all(r["labels"]["commit"][:12] == checked
                             and r["status"] in ("ok", "interrupted") for r in runs[20:]), runs
    assert [r["status"] for r in runs[20:]].count("interrupted") <= 1, runs
    # Its labs are down: those its runs name (a bisection's labs are bis + hex, as
    # another test's running beside it under xdist are, so not told by the prefix).
    with open_store(str(db)) as store:
        labs = {store.get_run(r["id"], series=False).metadata["lab_name"] for r in runs[20:]}
    assert all(lab.startswith("bis") for lab in labs), labs
    assert not any(lab_namespaces(lab) for lab in labs), labs


@pytest.mark.parametrize("case", ["dirty", "bisecting", "backwards", "no such rev"])
def test_bad_input_is_refused_and_changes_nothing(tmp_path: Path, case: str) -> None:
    repo = tmp_path / "repo"
    shas = make_repo(repo, "100mbit", "80mbit")
    good, bad = shas[0], "main"
    if case == "dirty":
        (repo / "lab.toml").write_text("# edited\n")
    elif case == "bisecting":
        git(repo, "bisect", "start", "main", shas[0])
    elif case == "backwards":
        good, bad = "main", shas[0]
    else:
        good = "v9.9"
    head = git(repo, "rev-parse", "HEAD")
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", good,
                  "--bad", bad, "--db", str(tmp_path / "runs.db"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = {"dirty": "uncommitted changes", "bisecting": "already in progress",
               "backwards": "is not an ancestor of", "no such rev": "--good v9.9: not a commit"}
    assert message[case] in proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / ".git" / "BISECT_START").exists() == (case == "bisecting")
    assert not (tmp_path / "runs.db").exists() or _runs(tmp_path / "runs.db") == 0


def test_check_alone_as_the_script_of_a_bisection_the_user_drives(measured: Measured,
                                                                 tmp_path: Path) -> None:
    # Runs of the good and the bad commit taken with `hoplab run` (10 each, as bisect run
    # takes: the fixture's), chosen by id; then git bisect run with `hoplab bisect check`
    # as its script, as docs/versions.md says, between commits 17 (good) and 20 (bad).
    repo, db = measured.copy(tmp_path)
    shas = measured.shas
    # A selection that matches nothing is an error, which must stop git (>= 128), not
    # read as "bad".
    empty = subprocess.run([*HOPLAB, "bisect", "check", "exp.toml", "--good", "version=x",
                            "--bad", "11-20", "--db", str(db)], cwd=repo, capture_output=True,
                           text=True, check=False)
    assert empty.returncode == 128 and "no runs match 'version=x'" in empty.stderr
    git(repo, "bisect", "start", shas[19], shas[16])
    try:
        proc = subprocess.run(["git", "bisect", "run", *HOPLAB, "bisect", "check", "exp.toml",
                               "--good", "1-10", "--bad", "11-20", "--db", str(db)],
                              cwd=repo, capture_output=True, text=True, check=False,
                              timeout=600)
    finally:
        log = git(repo, "bisect", "log")
        git(repo, "bisect", "reset")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{shas[18]} is the first bad commit" in proc.stdout, proc.stdout + log
    # The first bad commit's runs are stored under its SHA.
    listed = hoplab("runs", "--filter", f"commit={shas[18]}", "--db", str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) >= 5


def test_every_step_leaves_out_a_difference_under_the_min_step(tmp_path: Path) -> None:
    # Runs stored per commit (no lab is built): commit 2 is 1 % above commit 1, beyond
    # the noise of five runs a side (no overlap: p = 0.008) but with an interval reaching
    # past 2 %, and commit 3 is 20 % below. With --min-step 2 only commit 3 is a step
    # (docs/versions.md: ends that differ at p < 0.01 by less count as no step); the
    # 1 % was once reported as a step, as GRO on or off was in the NAT example.

    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = make_repo(repo, "100mbit", "80mbit", commits=3, step=3)
    one = [95e6, 98.9e6, 99e6, 99.1e6, 99.2e6]
    levels = {shas[0]: one, shas[1]: [99.6e6, 99.8e6, 100e6, 100.2e6, 104e6],
              shas[2]: [v * 0.8 for v in one]}
    store_levels(db, levels)
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                  "--bad", "main", "--db", str(db), "--max-repeat", "5", "--all")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.findall(r"^step at \w+ change (\d+)", proc.stdout, re.M) == ["3"], proc.stdout
    assert "1 step between" in proc.stdout and _runs(db) == 15
    _left_clean(repo)


PING_LAB = """name = "bisected"
[nodes.a]
[nodes.b]
[[links]]
between = ["a", "b"]
delay = "{delay}"
"""
PING = """lab = "lab.toml"
pause = "0s"
[[tests]]
name = "p"
kind = "ping"
from = "a"
to = "b"
duration = "0.5s"
interval = "20ms"
"""


def test_a_build_that_never_ends_is_killed_and_its_commit_skipped(tmp_path: Path) -> None:
    """4 commits, the delay doubling at commit 3, the builds of commits 2 and 3 hanging:
    past --build-timeout each is killed with its process group and answers 125, so git
    bisect is left with skipped commits only and no commit is named."""
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = history(repo, 4, lambda i: {
        "exp.toml": PING, "lab.toml": PING_LAB.format(delay="10ms" if i >= 3 else "5ms")})
    pids = tmp_path / "pids"
    hang = (f'case "$HOPLAB_COMMIT" in {shas[1]}|{shas[2]}) sleep 100000 & '
            f'echo $! >> {pids}; wait;; esac')
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                  "--bad", shas[-1], "--db", str(db), "--metric", "rtt_median",
                  "--max-repeat", "5", "--build", hang, "--build-timeout", "2",
                  timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr
    assert "no commit is named" in proc.stdout
    for sha in shas[1:3]:
        assert f"build of {sha[:12]} did not finish in 2 s (--build-timeout)" in said, said
    sleepers = [int(p) for p in pids.read_text().split()]
    assert len(sleepers) == 2
    deadline = time.monotonic() + 30
    while any(_running(p) for p in sleepers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p for p in sleepers if _running(p)] == []
    _left_clean(repo)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
