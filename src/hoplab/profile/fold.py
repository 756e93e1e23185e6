"""perf script output -> folded stacks ("a;b;c COUNT"), with hoplab-fold.

hoplab-fold (fold/, a Rust program built by `make setup`) gives byte for byte the
output of FlameGraph's stackcollapse-perf.pl: one line per distinct stack, sorted,
frames root first, separated by ';', the process name as the root frame (with -PID or
-PID/TID under --pid/--tid), kernel frames suffixed _[k] and JIT frames _[j] under
--kernel/--jit/--all, and raw addresses for unresolved frames under --addrs. It
reads its input once, line by line: its memory holds the distinct stacks, not the
input. tests/unit/test_fold_flamegraph.py checks it on FlameGraph's own test set.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from hoplab.errors import HoplabError, UsageError
from hoplab.profile.tools import need

OPTIONS = ("pid", "tid", "kernel", "jit", "all", "addrs")
FOLDER = "hoplab-fold"


def argv(options: Sequence[str] = ("all", "pid"), event: str | None = None) -> list[str]:
    """The folder's command line (its input: a file or standard input, added by callers)."""
    for opt in options:
        if opt not in OPTIONS:
            raise ValueError(f"unknown fold option {opt!r}; use {', '.join(OPTIONS)}")
    extra = [f"--event-filter={event}"] if event else []
    return [need(FOLDER), *[f"--{o}" for o in options], *extra]


def _checked(proc: subprocess.CompletedProcess[str]) -> str:
    if proc.returncode != 0:
        raise HoplabError(f"{FOLDER} failed: {' '.join(proc.stderr.split())[:300]}")
    return proc.stdout


def collapse(script_text: str, options: Sequence[str] = ("all", "pid")) -> str:
    """Folds perf script output held in memory."""
    return _checked(subprocess.run(argv(options), input=script_text, capture_output=True,
                                   text=True, errors="replace", check=False))


def collapse_file(path: Path, options: Sequence[str] = ("all", "pid")) -> str:
    """Folds a perf script output file, which the folder streams (never read in here)."""
    if not path.is_file():
        raise UsageError(f"cannot read {path}: no such file")
    return _checked(subprocess.run([*argv(options), str(path)], capture_output=True,
                                   text=True, errors="replace", check=False))


def parse(folded: str) -> Counter[str]:
    """Folded text -> {stack: count}; a malformed line is an error naming it."""
    out: Counter[str] = Counter()
    for n, line in enumerate(folded.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise HoplabError(f"folded stacks, line {n}: expected 'frame;frame COUNT', "
                              f"got {line[:80]!r}")
        out[stack] += int(count)
    return out


def render(stacks: Counter[str]) -> str:
    return "".join(f"{s} {c}\n" for s, c in sorted(stacks.items()))


def _root(stack: str) -> tuple[str, str]:
    root, _, rest = stack.partition(";")
    return root, rest


def pid_of(root: str) -> int | None:
    """The PID in a root frame written by --pid ("iperf3-1234") or --tid ("x-12/13")."""
    tail = root.rsplit("-", 1)[-1].split("/")[0]
    return int(tail) if tail.isdigit() else None


def without_pids(stacks: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for stack, count in stacks.items():
        root, rest = _root(stack)
        name = root.rsplit("-", 1)[0] if pid_of(root) is not None else root
        out[f"{name};{rest}" if rest else name] += count
    return out


def only_pids(stacks: Counter[str], pids: Iterable[int]) -> Counter[str]:
    keep = set(pids)
    return Counter({s: c for s, c in stacks.items() if pid_of(_root(s)[0]) in keep})
