"""The one module that talks to git: a repository being bisected (checks before,
checkouts during, reset after) and `git bisect run` with a script.

Every git command runs as `git -C DIR ...` with its output captured; a failure is a
UsageError carrying git's own message.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from hoplab.errors import HoplabError, UsageError
from hoplab.lab.signals import shielded

# git bisect run reads 0 as good, 1..127 but 125 as bad, 125 as "skip" and 128 or
# more as "abort".
SKIP = 125
ABORT = 128
_FIRST_BAD = re.compile(r"^([0-9a-f]{40}) is the first bad commit", re.M)


def git(repo: Path, *args: str) -> str:
    """git's stdout, stripped; UsageError with git's own message if it fails."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise UsageError(f"git {' '.join(args)} in {repo}: "
                         f"{proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc.stdout.strip()


def _ok(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git's answer where a non-zero exit is an answer (no such ref, not an ancestor)."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=False)


def head(repo: Path) -> str | None:
    """The commit checked out in `repo`, None if there is none (not a repository)."""
    return _ok(repo, "rev-parse", "HEAD").stdout.strip() or None


def toplevel(path: Path) -> Path:
    return Path(git(path, "rev-parse", "--show-toplevel"))


@contextmanager
def _worktrees_locked(repo: Path) -> Iterator[None]:
    """Benches of one machine share the repository: one of them at a time adds, removes
    or prunes its worktrees. git writes a new worktree's entry in .git/worktrees a file
    at a time, and a `worktree prune` or `add` of another bench that reads it half made
    fails ("failed to read .git/worktrees/tree1/commondir") or forgets it. An flock, so a
    bench killed while it holds it lets go."""
    common = _ok(repo, "rev-parse", "--git-common-dir").stdout.strip()
    if not common:
        yield       # not a repository: the git command says so itself
        return
    with open(repo / common / "hoplab-worktrees.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def add_worktree(repo: Path, path: Path, sha: str) -> Path:
    """A checkout of commit `sha` at `path` sharing `repo`'s objects (`git worktree add
    --detach`): a fleet bench measures a commit there, leaving `repo`'s own checkout and
    other benches' worktrees as they are. The entries of worktrees whose directories are
    gone (a killed bench's, even one killed half way through its add) are pruned first."""
    with _worktrees_locked(repo):
        _ok(repo, "worktree", "prune")
        git(repo, "worktree", "add", "-q", "--detach", str(path), sha)
    return path


def remove_worktree(repo: Path, path: Path) -> None:
    """Remove a worktree add_worktree made (and what a build left in it); never raises:
    `git worktree prune` forgets one whose directory went another way."""
    with _worktrees_locked(repo):
        _ok(repo, "worktree", "remove", "--force", str(path))
        shutil.rmtree(path, ignore_errors=True)
        _ok(repo, "worktree", "prune")


class Repo:
    """The repository being bisected: checks before, checkouts during, reset after."""

    def __init__(self, path: str) -> None:
        start = Path(path)
        if not start.is_dir():
            raise UsageError(f"--repo {path}: no such directory")
        self.top = toplevel(start)
        if Path(self.top, git(self.top, "rev-parse", "--git-path", "BISECT_START")).exists():
            raise UsageError(f"a git bisect is already in progress in {self.top}; end it "
                             f"with `git -C {self.top} bisect reset` first")
        dirty = git(self.top, "status", "--porcelain", "--untracked-files=no")
        if dirty:
            raise UsageError(f"{self.top} has uncommitted changes ({dirty.splitlines()[0]}"
                             "...): bisection checks out other commits; commit or stash them")
        branch = _ok(self.top, "symbolic-ref", "-q", "--short", "HEAD").stdout.strip()
        self.orig = branch or git(self.top, "rev-parse", "HEAD")
        self.bisecting = False

    def commit(self, rev: str, option: str) -> str:
        """The full SHA of commit `rev`; UsageError naming `option` if there is none."""
        proc = _ok(self.top, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
        if proc.returncode != 0:
            raise UsageError(f"{option} {rev}: not a commit of {self.top}")
        return proc.stdout.strip()

    def is_ancestor(self, a: str, b: str) -> bool:
        return _ok(self.top, "merge-base", "--is-ancestor", a, b).returncode == 0

    def first_parents(self, good: str, bad: str) -> list[str]:
        """good, then the commits on bad's first-parent line after it, oldest first."""
        return [good, *git(self.top, "rev-list", "--first-parent", "--reverse",
                           f"{good}..{bad}").split()]

    def checkout(self, sha: str) -> Path:
        if git(self.top, "rev-parse", "HEAD") != sha:
            git(self.top, "checkout", "-q", "--detach", sha)
        return self.top

    def subject(self, sha: str) -> str:
        """'abc1234 the commit's subject'."""
        return git(self.top, "log", "-1", "--format=%h %s", sha)

    def bisect_run(self, good: str, bad: str, script: Sequence[str], env: dict[str, str],
                   echo: Callable[[str], None]) -> str | None:
        """`git bisect start BAD GOOD` and `git bisect run SCRIPT` (with `env` added to
        its environment), each line git prints handed to `echo`. Returns the first bad
        commit, or None if git ended without one. restore() resets the bisection."""
        git(self.top, "checkout", "-q", self.orig)
        self.bisecting = True
        git(self.top, "bisect", "start", bad, good, "--")
        # Its own session: a Ctrl-C reaches this process only, which then stops git and
        # the script under way (SIGTERM: a check's run takes its lab down) and waits for
        # them before the bisection is reset.
        proc = subprocess.Popen(["git", "-C", str(self.top), "bisect", "run", *script],
                                stdout=subprocess.PIPE, text=True, start_new_session=True,
                                env={**os.environ, **env})
        assert proc.stdout is not None
        out = []
        try:
            for line in proc.stdout:
                out.append(line)
                echo(line.rstrip("\n"))
            proc.wait()
        except BaseException:
            _stop(proc)
            raise
        first = _FIRST_BAD.search("".join(out))
        return first.group(1) if first else None

    def restore(self) -> None:
        """Back to where the user was, bisect state reset; never raises."""
        with suppress(HoplabError):
            if self.bisecting:
                git(self.top, "bisect", "reset")
                self.bisecting = False
            else:
                git(self.top, "checkout", "-q", self.orig)


def _stop(proc: subprocess.Popen[str]) -> None:
    with shielded():
        for sig, wait in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
