"""`hoplab bisect run` through the command line, on a repository the test makes: 32
commits of a lab file, where commit 19 lowers a link's rate and commit 9 changes
something irrelevant."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.lab import HOPLAB, hoplab, namespaces

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

EXPERIMENT = """lab = "lab.toml"
pause = "0.1s"
[[tests]]
name = "bulk"
kind = "tcp"
from = "client"
to = "server"
duration = "1s"
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def make_repo(repo: Path, before: str, after: str, impair: str = "", *, commits: int = 32,
              step: int = 19) -> list[str]:
    """32 commits; commit 19 changes the r1-server rate from `before` to `after`, commit
    9 writes out the client link's default queue length (an irrelevant change); the
    others touch a notes file. Returns the SHAs, commit 1 first."""
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    (repo / "exp.toml").write_text(EXPERIMENT)
    shas = []
    for i in range(1, commits + 1):
        rate = after if i >= step else before
        extra = "queue = 1000" if i >= 9 else ""     # the default queue length, written out
        (repo / "lab.toml").write_text(LAB.format(rate=rate, extra=extra, impair=impair))
        (repo / "NOTES").write_text(f"change {i}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return shas


def _runs(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("select count(*) from runs").fetchone()[0])


def _left_clean(repo: Path) -> None:
    assert not (repo / ".git" / "BISECT_START").exists()
    assert _git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert _git(repo, "status", "--porcelain") == ""


def test_bisect_names_the_commit_that_lowered_the_rate(tmp_path: Path) -> None:
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = make_repo(repo, "100mbit", "80mbit")
    args = ("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
            "--bad", "main", "--db", str(db), "--max-repeat", "10")
    proc = hoplab(*args, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
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
    assert _runs(db) == before
    assert "(0 new)" in again.stdout and "new)" in again.stdout
    _left_clean(repo)


def test_a_change_inside_the_noise_names_no_commit(tmp_path: Path) -> None:
    # 3 % random loss and 20 ms of delay make 1 s of TCP goodput vary by several per
    # cent between repetitions, and loss, not the rate, limits it: a 3 % lower rate
    # cannot be told from the noise with 8 repetitions. (Should good and bad differ by
    # chance, the commits between cannot be told either, and after 3 of them it stops.)
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = make_repo(repo, "100mbit", "97mbit", impair='delay = "20ms"\nloss = 3')
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                  "--bad", shas[-1], "--db", str(db), "--max-repeat", "8", timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cannot decide" in proc.stdout and "first bad commit" not in proc.stdout
    assert "No commit is named" in proc.stdout or "no commit is named" in proc.stdout
    assert re.search(r"smallest change detectable with \d+ vs \d+ repetitions", proc.stdout)
    assert not any(sha[:7] in proc.stdout.split("cannot decide")[1] for sha in shas[1:-1])
    _left_clean(repo)


def test_ctrl_c_stops_the_check_takes_its_lab_down_and_resets_the_bisection(
        tmp_path: Path) -> None:
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = make_repo(repo, "100mbit", "80mbit")
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
        # before its runs, after the ends were measured (their references counted 10).
        if "stored, running" in line and any(" 5 stored, running 5 more" in x for x in seen) \
                and not line.strip().startswith((shas[0][:12], shas[-1][:12])):
            break
        assert time.monotonic() < deadline, "".join(seen)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + err
    _left_clean(repo)
    assert not [n for n in namespaces() if n.startswith("hoplab-bis")]
    # The run the check was taking is kept as interrupted, the ones before it as ok.
    with sqlite3.connect(db) as conn:
        statuses = {s for (s,) in conn.execute("select status from runs")}
    assert "ok" in statuses


@pytest.mark.parametrize("case", ["dirty", "bisecting", "backwards", "no such rev"])
def test_bad_input_is_refused_and_changes_nothing(tmp_path: Path, case: str) -> None:
    repo = tmp_path / "repo"
    shas = make_repo(repo, "100mbit", "80mbit")
    good, bad = shas[0], "main"
    if case == "dirty":
        (repo / "lab.toml").write_text("# edited\n")
    elif case == "bisecting":
        _git(repo, "bisect", "start", "main", shas[0])
    elif case == "backwards":
        good, bad = "main", shas[0]
    else:
        good = "v9.9"
    head = _git(repo, "rev-parse", "HEAD")
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", good,
                  "--bad", bad, "--db", str(tmp_path / "runs.db"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = {"dirty": "uncommitted changes", "bisecting": "already in progress",
               "backwards": "is not an ancestor of", "no such rev": "--good v9.9: not a commit"}
    assert message[case] in proc.stderr
    assert _git(repo, "rev-parse", "HEAD") == head
    assert (repo / ".git" / "BISECT_START").exists() == (case == "bisecting")
    assert not (tmp_path / "runs.db").exists() or _runs(tmp_path / "runs.db") == 0


def test_check_alone_as_the_script_of_a_bisection_the_user_drives(tmp_path: Path) -> None:
    # Runs of the good and the bad commit taken with `hoplab run` (10 each, as bisect run
    # takes), chosen by id; then
    # git bisect run with `hoplab bisect check` as its script, as docs/versions.md says.
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = make_repo(repo, "100mbit", "80mbit", commits=4, step=3)
    for sha in (shas[0], shas[-1]):
        _git(repo, "checkout", "-q", sha)
        proc = hoplab("run", str(repo / "exp.toml"), "--repeat", "10", "--db", str(db),
                      timeout=300)
        assert proc.returncode == 0, proc.stderr
    _git(repo, "checkout", "-q", "main")
    # A selection that matches nothing is an error, which must stop git (>= 128), not
    # read as "bad".
    empty = subprocess.run([*HOPLAB, "bisect", "check", "exp.toml", "--good", "version=x",
                            "--bad", "11-20", "--db", str(db)], cwd=repo, capture_output=True,
                           text=True, check=False)
    assert empty.returncode == 128 and "no runs match 'version=x'" in empty.stderr
    _git(repo, "bisect", "start", "main", shas[0])
    try:
        proc = subprocess.run(["git", "bisect", "run", *HOPLAB, "bisect", "check", "exp.toml",
                               "--good", "1-10", "--bad", "11-20", "--db", str(db)],
                              cwd=repo, capture_output=True, text=True, check=False,
                              timeout=600)
    finally:
        log = _git(repo, "bisect", "log")
        _git(repo, "bisect", "reset")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{shas[2]} is the first bad commit" in proc.stdout, proc.stdout + log
    # The first bad commit's runs are stored under its SHA.
    listed = hoplab("runs", "--filter", f"commit={shas[2]}", "--db", str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) >= 5
