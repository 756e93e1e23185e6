"""Git histories the bisection tests make, and runs stored per commit as `bisect run`
stores them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from hoplab.store import open_store
from tests.helpers.runs import make_run


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def history(repo: Path, commits: int, files: Callable[[int], dict[str, str]]) -> list[str]:
    """A new repository of `commits` commits, commit i writing files(i) (name: text)
    and a notes file, so that every commit changes something. Returns the SHAs, commit
    1 first."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    shas = []
    for i in range(1, commits + 1):
        for name, text in {**files(i), "NOTES": f"change {i}\n"}.items():
            (repo / name).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def store_levels(db: Path | str, levels: dict[str, list[float]]) -> None:
    """Finished runs per commit (experiment exp, test bulk, label commit=SHA), one per
    goodput given, in the store at `db` (a SQLite path or a URL)."""
    with open_store(str(db)) as store:
        for sha, values in levels.items():
            for rep, value in enumerate(values, 1):
                run = make_run(rep=rep, labels={"commit": sha}, goodput=value)
                run.experiment = "exp"
                store.save_run(run)
