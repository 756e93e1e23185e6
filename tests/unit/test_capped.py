"""tests/helpers/capped.py, which runs make test's unit tests beside the pool: its
command gets at most the CPU share it is given, in a cgroup it removes afterwards, and
its exit status and signals pass through."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.lab.vm.cgroup import hierarchy
from tests.helpers.capped import PREFIX

REPO = Path(__file__).resolve().parents[2]
CAPPED = [sys.executable, "-m", "tests.helpers.capped"]

# Spins for a wall-clock second and prints its CPU time and its cgroups.
SPIN = ("import time\n"
        "t, c = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - t < 1.0: pass\n"
        "print(time.process_time() - c)\n"
        "print(open('/proc/self/cgroup').read())\n")

needs_cgroup = pytest.mark.skipif(os.geteuid() != 0 or hierarchy() is None,
                                  reason="needs root and a cgroup CPU controller")


def _leftovers() -> list[Path]:
    h = hierarchy()
    return [] if h is None else [p for p in h.root.glob(PREFIX + "*")]


@needs_cgroup
def test_the_command_gets_at_most_its_share_in_a_cgroup_removed_after() -> None:
    out = subprocess.run([*CAPPED, "--cpu", "30", "--", sys.executable, "-c", SPIN],
                         cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    cpu_s, groups = out.stdout.split("\n", 1)
    # The kernel's cap: 30 ms a 100 ms period, over one second of spinning (ten
    # periods, and parts of two at its ends).
    assert float(cpu_s) <= 0.30 + 0.03, out.stdout
    assert PREFIX in groups, groups
    assert not [p for p in _leftovers() if p.name.endswith(f".{os.getpid()}")]


def test_the_exit_status_is_the_commands() -> None:
    proc = subprocess.run([*CAPPED, "--", "sh", "-c", "exit 3"], cwd=REPO, timeout=60,
                          check=False, capture_output=True)
    assert proc.returncode == 3


@needs_cgroup
def test_sigterm_reaches_the_command_and_nothing_is_left() -> None:
    proc = subprocess.Popen([*CAPPED, "--", "sh", "-c", "echo up; exec sleep 60"],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        groups = _leftovers()
        assert any(p.name == f"{PREFIX}{proc.pid}" for p in groups), groups
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert not any(p.name == f"{PREFIX}{proc.pid}" for p in _leftovers())


@needs_cgroup
def test_an_empty_cgroup_a_killed_run_left_is_removed_by_the_next() -> None:
    h = hierarchy()
    assert h is not None
    stale = h.root / f"{PREFIX}999999999"
    stale.mkdir()
    try:
        subprocess.run([*CAPPED, "--", "true"], cwd=REPO, timeout=60, check=True)
        assert not stale.exists()
    finally:
        if stale.exists():
            stale.rmdir()

