"""A time budget for the reads one thread makes: the dashboard gives each request one,
so that no selection, however large, keeps a request (and its slot) for long.

    with time_budget(10.0):
        store.list_runs(...)        # TooSlow once 10 s have passed, even mid-query

SQLite checks it from a progress handler while a statement runs (url.py); PostgreSQL
gets the time left as its statement_timeout (store.py). Both end the statement."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from hoplab.errors import HoplabError

_LOCAL = threading.local()
# SQLite virtual-machine steps between two looks at the clock (a few hundred µs).
PROGRESS_STEPS = 10_000


class TooSlow(HoplabError):
    """A read went past the time budget its thread was given."""


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Reads made by this thread in the block end with TooSlow after `seconds`."""
    previous = getattr(_LOCAL, "deadline", None)
    _LOCAL.deadline = time.monotonic() + seconds
    try:
        yield
    finally:
        _LOCAL.deadline = previous


def remaining() -> float | None:
    """Seconds left of this thread's budget (0 when spent); None without a budget."""
    deadline: float | None = getattr(_LOCAL, "deadline", None)
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def progress_handler() -> int:
    """For sqlite3's set_progress_handler: non-zero ends the statement."""
    left = remaining()
    return 1 if left is not None and left <= 0 else 0
