"""A pytest plugin: each worker of a parallel run (pytest-xdist) notes its PID, so that a
test's leak check can tell the processes another worker's tests started from its own
(tests.helpers.lab.worker_of). tests/conftest.py loads it for the whole suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.alone import LOCKS
from tests.helpers.lab import WORKER, register_worker


def pytest_configure(config: pytest.Config) -> None:
    name = os.environ.get(WORKER)
    if name is not None:
        # make test runs two parallel runs at once (the unit tests beside the pool), and
        # xdist names the workers of each gw0 and gw1: suffixed with the run's lock
        # directory, unique to the run, what one run's tests start is never taken for
        # the other's (a test inherits the name, and so does what it starts).
        run = os.environ.get(LOCKS)
        if run and "@" not in name:
            name = f"{name}@{Path(run).name}"
            os.environ[WORKER] = name
        register_worker(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get(WORKER) is not None:
        register_worker(None)
