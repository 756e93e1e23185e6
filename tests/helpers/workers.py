"""A pytest plugin: each worker of a parallel run (pytest-xdist) notes its PID, so that a
test's leak check can tell the processes another worker's tests started from its own
(tests.helpers.lab.worker_of). tests/conftest.py loads it for the whole suite."""

from __future__ import annotations

import os

import pytest

from tests.helpers.lab import WORKER, register_worker


def pytest_configure(config: pytest.Config) -> None:
    name = os.environ.get(WORKER)
    if name is not None:
        register_worker(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get(WORKER) is not None:
        register_worker(None)
