"""tests/helpers/lab.worker_of: which worker of a parallel run started a process, when
neither the process nor its parent shows the worker in its environment (nginx and sshd
write their titles over theirs; an SSH session's environment is fresh), as a device's
nginx in another worker's test once failed this worker's leak check (a CI run's
test_rpm_server: "nginx outlived its server")."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.alone import LOCKS
from tests.helpers.lab import WORKER, WORKERS_DIR, register_worker, worker_of


@pytest.fixture
def parent() -> Iterator[tuple[int, int]]:
    """A shell with no WORKER in its environment and its child, a sleep (PIDs)."""
    env = {k: v for k, v in os.environ.items() if k != WORKER}
    proc = subprocess.Popen(["sh", "-c", "sleep 2718 & wait"], env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not (kids := Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
                   .read_text().split()):
            assert time.monotonic() < deadline, "sh did not start its sleep"
            time.sleep(0.01)
        yield proc.pid, int(kids[0])
    finally:
        register_worker(None, proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_registered_ancestor_names_the_worker(parent: tuple[int, int]) -> None:
    sh, sleep = parent
    register_worker("gw7", sh)
    assert worker_of(sleep) == "gw7"
    register_worker(None, sh)
    assert worker_of(sleep) == os.environ.get(WORKER)


def test_a_registration_of_a_pid_since_reused_is_not_believed(
        parent: tuple[int, int]) -> None:
    sh, sleep = parent
    WORKERS_DIR.mkdir(exist_ok=True)
    (WORKERS_DIR / str(sh)).write_text("gw7 1\n")  # another process's start time
    assert worker_of(sleep) == os.environ.get(WORKER)


def test_a_parallel_runs_workers_carry_the_run_in_their_name() -> None:
    # make test runs the unit tests beside the pool: two runs whose workers xdist names
    # alike (tests/helpers/workers.py).
    name, run = os.environ.get(WORKER), os.environ.get(LOCKS)
    if name is not None and run:
        assert name.endswith(f"@{Path(run).name}"), name
