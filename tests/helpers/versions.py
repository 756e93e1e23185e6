"""The version history the "what changed" tests use (issue 21): 60 versions v1 ... v60 of
one test, three repetitions each, goodput with seed 002's steps at known places: +25 %
from v16, -15 % from v31, -49 % from v46 (so the newest step is v45 -> v46), 5 % noise
per repetition; the RTT steady."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hoplab.store import Store, open_store
from tests.helpers.runs import make_run

LEVEL = 400e6
STEPS = {16: 25.0, 31: -15.0, 46: -49.0}    # first version after the step: change in %
VERSIONS = 60
REPS = 3


def level(version: int, steps: dict[int, float] = STEPS) -> float:
    out = LEVEL
    for at, pct in steps.items():
        if version >= at:
            out *= 1 + pct / 100
    return out


def add_history(store: Store, *, experiment: str = "nat", versions: int = VERSIONS,
                reps: int = REPS, steps: dict[int, float] = STEPS, seed: int = 2,
                start: float = 1.7e9, labels: dict[str, str] | None = None) -> list[int]:
    """Save the history into `store` (versions v1 ... vN, in time order); the run ids."""
    rng = np.random.default_rng(seed)
    ids = []
    for v in range(1, versions + 1):
        for rep in range(1, reps + 1):
            run = make_run("nat-bulk", rep=rep, labels={"version": f"v{v}", **(labels or {})},
                           started_at=start + 3600 * v + rep,
                           goodput=float(rng.normal(level(v, steps), level(v, steps) * 0.05)),
                           rtt_median=float(rng.normal(2.0, 0.1)))
            run.experiment = experiment
            run.experiment_id = f"{experiment}-v{v}"
            ids.append(store.save_run(run))
    return ids


def history_store(path: Path, **kw: object) -> list[int]:
    with open_store(str(path)) as store:
        return add_history(store, **kw)  # type: ignore[arg-type]
