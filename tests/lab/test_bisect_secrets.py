"""`hoplab bisect run` on a PostgreSQL store whose URL holds a password: the password is in
no child's command line (which `ps` shows to every user) and in nothing hoplab prints,
git's echo of its script included. The store is reached, so the bisection is real:
runs stored per commit (as in tests/lab/test_bisect_json.py), git bisect and `bisect
check` running for real. Root only because `bisect` is a root command."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.git_history import git, history, store_levels
from tests.helpers.lab import HOPLAB
from tests.helpers.postgres import PgServer, pg_bindir, running

pytestmark = pytest.mark.root

# The throwaway server trusts 127.0.0.1, so any password gets in: what is checked is
# where it shows.
PASSWORD = "Hunter2-bisect-pw"

LAB = """name = "bissec"
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

# A git that writes every command line it is given to $ARGV_LOG, then runs the real one:
# hoplab's git commands, `git bisect run` with its script, and the git commands that
# script (`hoplab bisect check`) runs, each found on PATH as a user's would be.
SHIM = """#!/bin/sh
printf '%s\\n' "$*" >> "$ARGV_LOG"
exec {git} "$@"
"""


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    if pg_bindir() is None:
        pytest.skip("PostgreSQL server not installed (no /usr/lib/postgresql/*/bin/initdb): "
                    "run `make setup`")
    with running() as server:
        yield server


def _repo(repo: Path) -> list[str]:
    """Four commits; from commit 3 on the rate is 80 instead of 100 Mbit/s."""
    return history(repo, 4, lambda i: {"exp.toml": EXPERIMENT, "lab.toml": LAB.format(
        rate="80mbit" if i >= 3 else "100mbit")})


@pytest.mark.parametrize("given", ["--db", "HOPLAB_DB"])
def test_the_store_password_is_in_no_child_argv_and_no_output(pg: PgServer, tmp_path: Path,
                                                             given: str) -> None:
    url = pg.fresh_database().replace("postgres@", f"postgres:{PASSWORD}@")
    repo = tmp_path / "repo"
    shas = _repo(repo)
    store_levels(url, {sha: list(np.random.default_rng(i).normal(
        100e6 if i < 2 else 80e6, 0.5e6, 5)) for i, sha in enumerate(shas)})
    real_git = shutil.which("git")
    assert real_git
    bindir, log = tmp_path / "bin", tmp_path / "argv.log"
    bindir.mkdir()
    (bindir / "git").write_text(SHIM.format(git=real_git))
    (bindir / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "ARGV_LOG": str(log)}
    argv = [*HOPLAB, "bisect", "run", "exp.toml", "--repo", str(repo), "--good", shas[0],
            "--bad", "main", "--max-repeat", "5"]
    if given == "--db":
        argv += ["--db", url]
    else:
        env["HOPLAB_DB"] = url
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"first bad commit: {shas[2][:7]} change 3 ({shas[2]})" in proc.stdout, proc.stdout
    assert PASSWORD not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    # The shim saw git bisect run's command line, which holds its script's.
    lines = log.read_text().splitlines()
    assert any(" bisect run " in line and " bisect check " in line for line in lines)
    assert [line for line in lines if PASSWORD in line] == []
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"


def test_what_check_starts_does_not_inherit_the_store(pg: PgServer, tmp_path: Path) -> None:
    # `bisect run` hands the store to `check` in HOPLAB_DB; the build command the check
    # runs (the user's, and it may print its environment) is not given it. The build
    # fails, so the commit is skipped (125) before any lab is built.
    url = pg.fresh_database().replace("postgres@", f"postgres:{PASSWORD}@")
    repo = tmp_path / "repo"
    shas = _repo(repo)
    store_levels(url, {shas[0]: [100e6] * 5, shas[3]: [80e6] * 5})
    git(repo, "checkout", "-q", shas[1])
    seen = tmp_path / "seen"
    proc = subprocess.run(
        [*HOPLAB, "bisect", "check", "exp.toml", "--good", f"commit={shas[0]}",
         "--bad", f"commit={shas[3]}", "--build", f"env > {seen}; exit 1"],
        cwd=repo, env={**os.environ, "HOPLAB_DB": url}, capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 125, proc.stdout + proc.stderr
    assert "build of" in proc.stderr and "failed" in proc.stderr
    assert "HOPLAB_COMMIT=" + shas[1] in seen.read_text()
    assert "HOPLAB_DB" not in seen.read_text() and PASSWORD not in seen.read_text()
