"""Benches of one machine add and remove worktrees of one repository at once (a fleet
bisection): none of them may read another's half-made entry. The CI run of 2026-11-28
failed on `fatal: failed to read .git/worktrees/tree1/commondir` when one bench's
`worktree prune` or `add` met another's `add` half way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.git_history import history

ROUNDS = 15
BENCHES = 4

BENCH = """
import sys
from pathlib import Path
from hoplab.run.git import add_worktree, remove_worktree
repo, base, sha, rounds = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
for i in range(rounds):
    tree = base / f"tree{i}"
    add_worktree(repo, tree, sha)
    assert (tree / "exp.toml").is_file()
    remove_worktree(repo, tree)
"""


def test_benches_add_and_remove_worktrees_of_one_repository_at_once(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = history(repo, 2, lambda i: {"exp.toml": f"# {i}\n"})
    procs = [subprocess.Popen([sys.executable, "-c", BENCH, str(repo), str(tmp_path / f"b{n}"),
                               shas[-1], str(ROUNDS)], stderr=subprocess.PIPE, text=True)
             for n in range(BENCHES)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * BENCHES, errors
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"],
                            capture_output=True, text=True, check=True).stdout
    assert listed.count("worktree ") == 1, listed      # the repository's own checkout only
