"""A pytest plugin: tests two (or -n) at a time under pytest-xdist, with the few that
cannot share the machine kept apart. make test runs every test but the unit tests so, a
file's tests to one worker (docs/testing.md).

Most of a lab test's time is traffic at a shaped rate, waited for, and each is written to
pass beside a busy core (docs/testing.md). Two kinds cannot share:
- `alone`: it keeps both cores busy, or its figure is the CPU's (a VM router under TCG as
  it boots and forwards, a frame generator's own unpaced rate). It runs while no other
  test of the run does. make test runs them after the others, without xdist (pytest -m
  alone): in the pool each waited with a core idle for the other worker's test to end.
- `pairs`: it boots VM routers under TCG and asserts nothing of its own speed or
  timing (an example that runs to its end, a refusal, a cleanup): two can share the
  machine, slower but whole, while a test that measures cannot share it with one. It
  runs beside another only in a run of `pairs` tests alone (pytest -n 2 -m pairs, as
  make test runs them between the pool and the `alone` tests: 148 s one at a time, 107 s
  two at a time); in any other run it is kept apart as an `alone` test is.
- `machine`: no other test's lab may even be up (a plain `hoplab clean` removes every lab
  no live hoplab process uses, a lab another test keeps up between its commands too). It
  cannot run under xdist at all: run those on their own, after the others
  (pytest -m machine, as make test does last).

The workers share a readers-writer lock, two flock()ed files in a directory the
controller makes for the run and removes after it: every test holds the lock shared from
its setup to its teardown (the module and session fixtures it starts included), an
`alone` test holds it exclusively. A waiting `alone` test takes the turnstile first, so a
stream of other tests cannot starve it. Each worker's TMPDIR is a directory of its own
in there too. Without xdist the tests run one at a time and nothing is taken.
tests/conftest.py loads this plugin for the whole suite.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MARK = "alone"
PAIRS = "pairs"
# A plain `hoplab clean` removes the labs other tests keep up between their commands
# (their module's fixtures): such a test runs with nothing else in the run.
MACHINE = "machine"
# The run's lock directory, made by the controller; its workers inherit the variable.
LOCKS = "HOPLAB_TEST_LOCKS"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARK}: runs while no other test does (tests/helpers/alone.py)")
    config.addinivalue_line(
        "markers", f"{PAIRS}: may run beside another {PAIRS} test, in a run of those "
                   f"alone; in any other run as an {MARK} test (tests/helpers/alone.py)")
    config.addinivalue_line(
        "markers", f"{MACHINE}: no other test's lab may be up: never under xdist "
                   "(tests/helpers/alone.py)")
    if _controller(config):
        os.environ[LOCKS] = tempfile.mkdtemp(prefix="hl-")
        os.chmod(os.environ[LOCKS], 0o755)     # the workers' TMPDIRs are in it
    elif hasattr(config, "workerinput") and LOCKS in os.environ:
        # Each worker's temporary files, and those of everything its tests start, in a
        # directory of its own: a test that checks what a run left in the temporary
        # directory (a killed run's, a browser's) sees its own run's alone. Short, as
        # Chromium's sockets are in it (a socket's path has at most 107 bytes); removed
        # with the run's lock directory.
        own = Path(os.environ[LOCKS]) / str(config.workerinput["workerid"])
        own.mkdir(exist_ok=True)
        # As /tmp: tests hand parts of it to other users (PostgreSQL's data directory).
        os.chmod(own, 0o1777)
        os.environ["TMPDIR"] = str(own)
        tempfile.tempdir = None     # gettempdir() looks again


def pytest_unconfigure(config: pytest.Config) -> None:
    if _controller(config):
        shutil.rmtree(os.environ.pop(LOCKS), ignore_errors=True)


def _controller(config: pytest.Config) -> bool:
    """Whether this process hands tests to xdist's workers."""
    return not hasattr(config, "workerinput") and bool(
        getattr(config.option, "numprocesses", None))


def _locks() -> Path | None:
    """The run's lock directory, in a worker of an xdist run; else None."""
    if "PYTEST_XDIST_WORKER" not in os.environ or LOCKS not in os.environ:
        return None
    return Path(os.environ[LOCKS])


@contextmanager
def _flock(path: Path, how: int) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its lock


@contextmanager
def held(locks: Path, alone: bool) -> Iterator[None]:
    """The run's lock, exclusively for an `alone` test, shared for the others."""
    turnstile, lock = locks / "turnstile", locks / "lock"
    if alone:
        with _flock(turnstile, fcntl.LOCK_EX), _flock(lock, fcntl.LOCK_EX):
            yield
    else:
        with _flock(turnstile, fcntl.LOCK_EX):
            pass
        with _flock(lock, fcntl.LOCK_SH):
            yield


# Whether every test this run selected is a `pairs` test (each worker collects the same).
_only_pairs = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # trylast: after -m has deselected what the run does not select.
    global _only_pairs
    _only_pairs = bool(items) and all(i.get_closest_marker(PAIRS) is not None for i in items)


def exclusive(item: pytest.Item, only_pairs: bool) -> bool:
    """Whether `item` holds the run's lock exclusively."""
    if item.get_closest_marker(MARK) is not None:
        return True
    return item.get_closest_marker(PAIRS) is not None and not only_pairs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, None, None]:
    locks = _locks()
    if locks is None:
        yield
        return
    with held(locks, exclusive(item, _only_pairs)):
        yield


@pytest.fixture(autouse=True)
def _machine_tests_not_under_xdist(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker(MACHINE) is not None and _locks() is not None:
        pytest.fail(f"marked {MACHINE}: run it without -n, on its own (pytest -m {MACHINE})",
                    pytrace=False)
