"""A job on each of several nodes at once: what waits on forks, SSH round trips and
guests, not on this machine's CPUs, so a few threads at a time."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")


def workers() -> int:
    return max(2, min(8, (os.cpu_count() or 2) * 2))


def in_each(items: Sequence[_T], job: Callable[[_T], _R]) -> list[_R]:
    """job(item) for each item (a node's executor), a few threads at a time; the
    results in order. A job's exception is raised once those under way have ended, and
    those not started yet never start."""
    # Imported here: commands that never run a job on several nodes skip its import.
    from concurrent.futures import ThreadPoolExecutor

    if len(items) <= 1:
        return [job(n) for n in items]
    pool = ThreadPoolExecutor(max_workers=workers())
    try:
        return list(pool.map(job, items))
    finally:
        # On Ctrl-C or an error, queued jobs must not still start.
        pool.shutdown(wait=True, cancel_futures=True)
