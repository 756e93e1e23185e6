"""SIGTERM and SIGHUP stop `hoplab run` and `hoplab lab up` as Ctrl-C does, and no
further signal, however many, can cut the teardown short: nothing is left behind and
the finished runs are stored."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hoplab.lab.state import LABS_DIR
from hoplab.nodes.procs import proc_start_time
from hoplab.store import open_store
from tests.helpers.lab import (
    EXAMPLES,
    HOPLAB,
    holding,
    lab_namespaces,
    live_pids,
    new_lab_name,
    pids_in,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]

# The teardown command keeps the lab's teardown going for a second, for the signals
# that follow the first one to land in it.
LAB = """
name = "s"
[nodes.client]
[nodes.r1]
teardown = [["sleep", "1"]]
[nodes.server]
[[links]]
between = ["client", "r1"]
[[links]]
between = ["r1", "server"]
rate = "100mbit"
"""
EXPERIMENT = """
lab = "lab.toml"
repeat = 8
pause = "0s"
[[tests]]
name = "bulk"
kind = "tcp"
from = "client"
to = "server"
duration = "1s"
"""


def pester(proc: subprocess.Popen[str], sig: signal.Signals, seconds: float = 30) -> None:
    """Send `sig` every 20 ms until the process has exited."""
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(sig)
        time.sleep(0.02)


def into_a_run(lab: str, seconds: float = 60) -> set[int]:
    """Waits until a run's iperf3 server and client are running inside the lab; returns
    every process living in its namespaces then (the ones that must not outlive it)."""
    deadline = time.monotonic() + seconds
    while True:
        inside = pids_in(lab_namespaces(lab))
        if len(inside & live_pids("iperf3")) >= 2:
            return inside
        assert time.monotonic() < deadline, f"no run's iperf3 pair in lab {lab} in {seconds} s"
        time.sleep(0.02)


def workdirs(pid: int, tmp: Path | None = None) -> list[str]:
    """The run working directories of process `pid` (hoplab.nodes.workdir), in its
    TMPDIR `tmp` or the default one."""
    return glob.glob(f"{tmp or tempfile.gettempdir()}/hoplab-run-{pid}-*")


def alive(pids: set[int]) -> list[int]:
    """Those still running: a zombie has no start time (hoplab.lab.state)."""
    return [pid for pid in pids if proc_start_time(pid) is not None]


# (signal.SIGINT, None): one Ctrl-C, as a user presses it, and nothing after.
@pytest.mark.parametrize(("first", "then"), [
    (signal.SIGINT, None),
    (signal.SIGTERM, signal.SIGTERM), (signal.SIGHUP, signal.SIGHUP),
    (signal.SIGINT, signal.SIGTERM), (signal.SIGINT, signal.SIGINT)])
def test_run_stopped_by_a_signal_and_pestered_leaves_nothing(
        tmp_path: Path, first: signal.Signals, then: signal.Signals | None) -> None:
    """The finished runs are kept, the current one is stored as interrupted, and
    nothing is left: namespaces, the lab's record, the tools that ran inside."""
    (tmp_path / "lab.toml").write_text(LAB)
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT)
    db = tmp_path / "runs.db"
    name = new_lab_name()
    proc = subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(db), "--lab-name", name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        done = 0
        while time.monotonic() < deadline and done < 1:
            time.sleep(0.2)
            if db.exists():
                with open_store(str(db)) as store:
                    done = len(store.list_runs())
        assert done >= 1, "a run should have finished within a minute"
        inside = into_a_run(name)
        proc.send_signal(first)
        if then is not None:
            time.sleep(0.05)
            pester(proc, then)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert lab_namespaces(name) == set()
    assert not (LABS_DIR / f"{name}.json").exists()
    assert alive(inside) == []
    assert workdirs(proc.pid) == []
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
    with open_store(str(db)) as store:
        runs = store.list_runs()
        statuses = [r.status for r in runs]
        assert statuses[-1] == "interrupted" and statuses.count("interrupted") == 1
        assert statuses.count("ok") == len(runs) - 1 >= 1
        interrupted = store.get_run(runs[-1].id)
        assert interrupted.error is not None
        assert ("Ctrl-C" if first == signal.SIGINT else first.name) in interrupted.error
        assert store.get_run(runs[0].id).metric("goodput") is not None


WIREGUARD_LAB = (EXAMPLES / "wireguard-hops.toml").read_text().replace(
    "[nodes.server]\n", '[nodes.server]\nsetup = [["sleep", "120"]]\n')


@pytest.mark.parametrize("kind", ["chain150", "wireguard"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_lab_up_stopped_half_way_and_pestered_leaves_nothing(
        tmp_path: Path, sig: signal.Signals, kind: str) -> None:
    """Half way: the first namespaces exist, or (WireGuard) the first wireguard-go
    daemon runs. The WireGuard lab's setup command (run after its daemons start) waits,
    so that lab up is still building when the signal comes: on a loaded machine the test
    saw the daemon late, and its SIGHUP found a lab up that had finished."""
    file = tmp_path / "lab.toml"
    file.write_text("[generate]\nchain = 150\n" if kind == "chain150"
                    else WIREGUARD_LAB)
    name = new_lab_name()
    proc = subprocess.Popen([*HOPLAB, "lab", "up", str(file), "--name", name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            ours = lab_namespaces(name)
            if ours and (kind == "chain150" or pids_in(ours) & live_pids("wireguard-go")):
                break
            time.sleep(0.002)
        assert proc.poll() is None, "lab up finished before it could be interrupted"
        proc.send_signal(sig)
        pester(proc, sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert lab_namespaces(name) == set()
    assert not (LABS_DIR / f"{name}.json").exists()
    assert not (LABS_DIR / name).exists()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
    # Ours, not another lab's that someone else takes down now: they hold our log files.
    assert holding(LABS_DIR / name) == set()


# Run as `python -c HOOKED_UP lab up FILE --name NAME`: lab up, with a SIGHUP sent to
# itself from inside subprocess.Popen, after the fork of the first wireguard-go and once
# the child is inside the lab's namespace, where a signal from outside lands by chance.
# What the teardown's last resort (kill_leftovers) had to kill is printed after "left:".
HOOKED_UP = """
import os, signal, subprocess, sys, time
from hoplab.cli.main import main
from hoplab.lab import teardown

left, fired = [], []
kill = teardown.kill_leftovers
def noting(namespaces):
    found = kill(namespaces)
    left.extend(found)
    return found
teardown.kill_leftovers = noting

close = subprocess.Popen._close_pipe_fds
def stop_after_fork(self, *fds):
    close(self, *fds)
    if fired or "wireguard-go" not in self.args:
        return
    fired.append(self.pid)
    ours = os.stat("/proc/self/ns/net").st_ino
    deadline = time.monotonic() + 10
    while os.stat(f"/proc/{self.pid}/ns/net").st_ino == ours and time.monotonic() < deadline:
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGHUP)
subprocess.Popen._close_pipe_fds = stop_after_fork
code = main(sys.argv[1:])
print("fired:", len(fired), "left:", left, file=sys.stderr)
sys.exit(code)
"""


def test_lab_up_stopped_inside_the_start_of_a_daemon_stops_it(tmp_path: Path) -> None:
    """A stop signal that lands after a daemon's fork and before subprocess.Popen returns
    (the window the pestered test above hits by chance) still stops it as hoplab stops
    its daemons: none is left for the last resort to kill, and none survives."""
    file = tmp_path / "lab.toml"
    file.write_text((EXAMPLES / "wireguard-hops.toml").read_text())
    name = new_lab_name()
    done = subprocess.run([sys.executable, "-c", HOOKED_UP, "lab", "up", str(file),
                           "--name", name], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, check=False)
    assert "fired: 1 left: []" in done.stderr, done.stderr
    assert done.returncode == 130, done.stderr
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert lab_namespaces(name) == set()
    assert not (LABS_DIR / f"{name}.json").exists()
    assert holding(LABS_DIR / name) == set()


def test_run_killed_then_clean_leaves_nothing(tmp_path: Path) -> None:
    """SIGKILL cannot be caught: the lab, the tools inside it and the run's working
    directory stay until `hoplab clean`, which removes them all. The run and the clean
    have a TMPDIR of their own: any `hoplab clean` removes every run directory whose
    process has exited, and one that someone else ran on this machine between the kill
    and ours took this one first (seen on the shared test machine)."""
    (tmp_path / "lab.toml").write_text(LAB)
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT)
    db = tmp_path / "runs.db"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    name = new_lab_name()
    proc = subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(db), "--lab-name", name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (db.exists() and workdirs(proc.pid, tmp)):
            time.sleep(0.2)
        inside = into_a_run(name)
        left = workdirs(proc.pid, tmp)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert left and lab_namespaces(name), "the killed run left nothing to clean"
    cleaned = subprocess.run([*HOPLAB, "clean", name], capture_output=True, text=True,
                             check=False, timeout=120, env=env)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"removed run directory {left[0]}" in cleaned.stdout
    assert workdirs(proc.pid, tmp) == []
    assert lab_namespaces(name) == set()
    assert alive(inside) == []
