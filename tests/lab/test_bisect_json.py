"""`hoplab bisect run --json` through the command line, on runs stored per commit: every
commit the bisection visits has its runs in the store already (as a second bisection
over the same range has them), so git bisect and `bisect check` run for real and no
lab is built. Root only because `bisect` is a root command."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.git_history import git, history, store_levels
from tests.helpers.lab import hoplab

pytestmark = pytest.mark.root

LAB = """name = "bisjson"
[nodes.client]
[nodes.server]
[[links]]
between = ["client", "server"]
rate = "{rate}"
"""

EXPERIMENT = """lab = "lab.toml"
[[tests]]
name = "bulk"
kind = "tcp"
from = "client"
to = "server"
duration = "1s"
"""


def _repo(repo: Path, commits: int, step: int) -> list[str]:
    """`commits` commits; from commit `step` on, the lab's rate is 80 instead of 100
    Mbit/s. Returns the SHAs, commit 1 first."""
    return history(repo, commits, lambda i: {"exp.toml": EXPERIMENT, "lab.toml": LAB.format(
        rate="80mbit" if i >= step else "100mbit")})


def _count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("select count(*) from runs").fetchone()[0])


def _quiet(level: float, seed: int) -> list[float]:
    return list(np.random.default_rng(seed).normal(level, level * 0.01, 5))


# Between the two levels, unlike both within the noise: 5 runs cannot tell.
UNCLEAR = [100e6, 80e6, 90e6, 99e6, 81e6]


def test_json_names_the_first_bad_commit_with_every_step(tmp_path: Path) -> None:
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = _repo(repo, 8, 5)
    # Commit 6, which git visits second, cannot be told at 5 runs: it is skipped, and
    # commit 5 is still named, its neighbour 4 being good.
    levels = {sha: _quiet(100e6 if i < 4 else 80e6, i) for i, sha in enumerate(shas)}
    store_levels(db, {**levels, shas[5]: UNCLEAR})
    before = _count(db)
    # --good as a relative revision: it names commit 1 only while main is checked out,
    # which it is not while git bisects (the report once resolved it again then).
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", "main~7",
                  "--bad", "main", "--db", str(db), "--max-repeat", "5", "--json",
                  timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)            # stdout is the document only
    assert _count(db) == before              # nothing measured: every commit was stored
    assert doc["mode"] == "bisect" and doc["metric"] == "goodput"
    assert doc["first_bad"]["commit"] == shas[4] and doc["reason"] is None
    assert doc["first_bad"]["subject"].endswith("change 5")
    assert doc["good"]["commit"] == shas[0] and doc["bad"]["commit"] == shas[-1]
    assert doc["good"]["median"] == pytest.approx(np.median(_quiet(100e6, 0)))
    assert doc["bad"]["median"] == pytest.approx(np.median(_quiet(80e6, 7)))
    assert doc["bad"]["change_pct"] == pytest.approx(-20, abs=1) and doc["bad"]["p"] < 0.01
    steps = {shas.index(s["commit"]): s for s in doc["steps"]}
    assert 4 in steps and len(steps) <= 4                    # 6 commits between, 1 skipped
    unclear = steps.pop(5)
    assert unclear["verdict"] == "cannot tell" and unclear["answer"] == 125
    assert unclear["median"] == pytest.approx(90e6)
    assert unclear["vs_good"]["verdict"] == unclear["vs_bad"]["verdict"] == "unclear"
    # Why, and the power figure: what 5 against 5 runs can detect at this noise, and
    # the runs per side that a change of half the step (the bound) needs.
    assert unclear["reason"].startswith("not decided at these repetitions: smallest change")
    power = unclear["power"]
    assert (power["n_a"], power["n_b"]) == (5, 5)
    assert f"{power['detectable_pct']:.1f} %" in unclear["reason"]
    assert power["change_pct"] == pytest.approx(abs(doc["bad"]["change_pct"]) / 2, rel=0.01)
    assert power["needed"] > 5
    for i, step in steps.items():
        assert step["verdict"] == ("bad" if i >= 4 else "good"), step
        assert step["answer"] == (1 if i >= 4 else 0)
        assert step["runs"] == 5 and step["new_runs"] == 0
        assert step["median"] == pytest.approx(np.median(_quiet(100e6 if i < 4 else 80e6, i)))
        assert step["vs_good"]["verdict"] == ("same" if i < 4 else "different")
        assert step["vs_good"]["p"] is not None and step["reason"] is None
        # The power figure of the comparison with good: 5 against 5 repetitions at the
        # noise of both (1 %) detect a change of about 3.1 noise SDs (analysis/power.py).
        power = step["power"]
        assert (power["n_a"], power["n_b"], power["alpha"]) == (5, 5, 0.01)
        assert power["detectable_pct"] == pytest.approx(3.1 * power["noise_cv"] * 100,
                                                        rel=0.02)
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert not (repo / ".git" / "BISECT_START").exists()


def test_json_of_a_refusal_says_why_and_what_could_be_detected(tmp_path: Path) -> None:
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = _repo(repo, 3, 3)
    noisy = [80e6, 100e6, 90e6, 110e6, 95e6]
    store_levels(db, {shas[0]: noisy, shas[2]: [v * 0.97 for v in noisy[::-1]]})
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                  "--bad", shas[2], "--db", str(db), "--max-repeat", "5", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["first_bad"] is None and doc["steps"] == []
    assert doc["reason"] == "good and bad do not differ beyond the noise"
    assert doc["bad"]["change_pct"] == pytest.approx(-3.0, abs=0.01)
    assert doc["bad"]["p"] > 0.01
    power = doc["power"]
    # 5 against 5 at this noise: the smallest change they detect, and the repetitions
    # per side the measured 3 % would need.
    assert power["noise_cv"] == pytest.approx(0.118, abs=0.001)
    assert power["detectable_pct"] == pytest.approx(3.1 * power["noise_cv"] * 100, rel=0.02)
    assert power["change_pct"] == pytest.approx(3.0, abs=0.01)
    assert power["needed"] > 100
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"


def test_json_of_every_step(tmp_path: Path) -> None:
    repo, db = tmp_path / "repo", tmp_path / "runs.db"
    shas = _repo(repo, 4, 3)
    store_levels(db, {sha: list(np.random.default_rng(i).normal(100e6 if i < 2 else 80e6, 0.5e6, 5))
                for i, sha in enumerate(shas)})
    proc = hoplab("bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
                  "--bad", "main", "--db", str(db), "--max-repeat", "5", "--all", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["mode"] == "all" and doc["untold"] == [] and doc["reason"] is None
    (step,) = doc["steps"]
    assert step["commit"] == shas[2] == doc["first_bad"]["commit"]
    assert step["change_pct"] == pytest.approx(-20, abs=1.5) and step["p"] < 0.01
    assert (step["runs_before"], step["runs_after"]) == (5, 5)
    assert step["ci_pct"][0] < step["change_pct"] < step["ci_pct"][1]
