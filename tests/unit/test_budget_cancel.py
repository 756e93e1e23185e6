"""A budgeted PostgreSQL read ended at the statement_timeout the store set from the time
left is out of time (TooSlow), whatever the client's clock says then: the timeout was
floored to the millisecond once, the server ended a statement before the budget had, and
test_budget[postgresql] saw a plain error (tests/store/test_budget.py reads a real one)."""

from __future__ import annotations

import psycopg
import sqlalchemy as sa

from hoplab.store.store import _timed_out


def _error(orig: Exception) -> sa.exc.OperationalError:
    return sa.exc.OperationalError("SELECT pg_sleep(60)", {}, orig)


def test_a_cancel_at_the_statement_timeout_is_out_of_time() -> None:
    assert _timed_out(_error(psycopg.errors.QueryCanceled(
        "canceling statement due to statement timeout")))


def test_other_cancels_and_errors_are_not() -> None:
    assert not _timed_out(_error(psycopg.errors.QueryCanceled(
        "canceling statement due to user request")))
    assert not _timed_out(_error(psycopg.errors.AdminShutdown(
        "terminating connection due to administrator command")))
    assert not _timed_out(_error(ValueError("statement timeout")))
