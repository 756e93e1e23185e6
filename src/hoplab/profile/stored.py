"""A stored run's folded stacks, whole or one node's, and those of a side of a diff: what
`hoplab flamegraph`, `hoplab profile` and their --diff (cli/profile.py,
cli/profile_diff.py) all read."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from hoplab.analysis.select import parse_ranges
from hoplab.errors import UsageError
from hoplab.profile import fold

if TYPE_CHECKING:
    from hoplab.record import RunRecord
    from hoplab.store import Store

# The raw output a profiled run's folded stacks (with PIDs) are stored under.
FOLDED = "profile folded"


def run_stacks(store: Store, run_id: int, node: str | None) -> tuple[RunRecord, Counter[str]]:
    """Run `run_id` and its folded stacks without PIDs; with `node`, only those of its
    processes (a device's: all of them). UsageError if it has no profile or not that node."""
    rec = store.get_run(run_id, series=False)
    prof = rec.metadata.get("profile")
    if not isinstance(prof, dict):
        raise UsageError(f"run {run_id} has no profile: add a [profile] table to its "
                         f"experiment (see docs/profiles.md)")
    if prof.get("status") != "ok":
        raise UsageError(f"run {run_id}'s profile is missing: {prof.get('reason')}")
    try:
        stacks = fold.parse(store.raw_output(run_id, FOLDED).decode("utf-8", "replace"))
    except UsageError:
        raise UsageError(f"run {run_id} has no folded stacks stored") from None
    if node is not None:
        by_node = prof.get("by_node", {})
        if node not in by_node:
            raise UsageError(f"run {run_id}'s profile attributes no processes to node "
                             f"{node!r}; profiled nodes: {', '.join(by_node) or 'none'}")
        if not by_node[node].get("whole_machine"):
            # A device's profile is all its own; a namespace's, its processes' samples.
            stacks = fold.only_pids(stacks, by_node[node]["pids"])
    return rec, fold.without_pids(stacks)


def side_stacks(store: Store, spec: str, ids: list[int], node: str | None
                ) -> tuple[list[int], list[Counter[str]], list[int]]:
    """The profiles of one side of a diff: (their runs, their stacks, runs left out).
    Runs named by id must have a profile; a key=value selection leaves out its runs
    without one."""
    named = parse_ranges(spec) is not None
    runs, stacks, skipped = [], [], []
    for run_id in ids:
        if not named:
            prof = store.get_run(run_id, series=False).metadata.get("profile")
            if not isinstance(prof, dict) or prof.get("status") != "ok":
                skipped.append(run_id)
                continue
        runs.append(run_id)
        stacks.append(run_stacks(store, run_id, node)[1])
    if not runs:
        raise UsageError(f"{spec!r} selects no run with a profile (runs "
                         f"{', '.join(map(str, skipped[:10]))} have none); add a [profile] "
                         f"table to the experiment (docs/profiles.md)")
    return runs, stacks, skipped
