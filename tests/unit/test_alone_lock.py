"""The suite's readers-writer lock (tests/helpers/alone.py): an `alone` test excludes
every other, the others share, and a waiting `alone` test holds the turnstile so that no
new test starts before it."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from tests.helpers.alone import exclusive, held


def _free(path: Path, how: int) -> bool:
    """Whether `how` on `path` would be granted now (probed without waiting)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"not {what} in 10 s")
        time.sleep(0.001)


def test_alone_excludes_the_others_and_the_others_share(tmp_path: Path) -> None:
    with held(tmp_path, alone=True):
        assert not _free(tmp_path / "lock", fcntl.LOCK_SH)
    with held(tmp_path, alone=False), held(tmp_path, alone=False):
        assert _free(tmp_path / "lock", fcntl.LOCK_SH)
        assert not _free(tmp_path / "lock", fcntl.LOCK_EX)
    assert _free(tmp_path / "lock", fcntl.LOCK_EX)


def test_a_waiting_alone_test_stops_new_ones_from_starting(tmp_path: Path) -> None:
    order: list[str] = []

    def alone() -> None:
        with held(tmp_path, alone=True):
            order.append("alone")

    def shared() -> None:
        with held(tmp_path, alone=False):
            order.append("later")

    with held(tmp_path, alone=False):
        first = threading.Thread(target=alone)
        first.start()
        # It holds the turnstile while it waits for the running test to end.
        _until(lambda: not _free(tmp_path / "turnstile", fcntl.LOCK_EX), "waiting")
        second = threading.Thread(target=shared)
        second.start()
        assert order == []
    first.join(10)
    second.join(10)
    assert order == ["alone", "later"]



class _Item:
    """What exclusive() reads of a test: its marks."""

    def __init__(self, *marks: str) -> None:
        self.marks = marks

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


@pytest.mark.parametrize(("marks", "only_pairs", "want"), [
    ((), False, False),
    (("alone",), False, True),
    (("alone",), True, True),
    # A `pairs` test shares only in a run of `pairs` tests (make test's phase of them).
    (("pairs",), True, False),
    (("pairs",), False, True),
])
def test_a_pairs_test_shares_only_with_pairs_tests(marks: tuple[str, ...], only_pairs: bool,
                                                   want: bool) -> None:
    assert exclusive(cast(pytest.Item, _Item(*marks)), only_pairs) is want
