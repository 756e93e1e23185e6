"""The lab state record: saved before things exist, and safe against PID reuse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hoplab.errors import LabError
from hoplab.lab import state as state_mod
from hoplab.lab.netns import batch_error
from hoplab.lab.state import LabState
from hoplab.nodes.executor import ProcessId
from hoplab.nodes.netns_exec import NetnsExecutor
from hoplab.nodes.procs import Proc, proc_start_time


@pytest.fixture
def labs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "labs"
    monkeypatch.setattr(state_mod, "LABS_DIR", d)
    return d


def test_state_round_trips_through_its_file(labs_dir: Path) -> None:
    st = LabState(name="x", source="/tmp/x.toml", namespaces=["hoplab-x-a", "hoplab-x-b"])
    st.save()
    assert (labs_dir / "x.json").exists()
    back = state_mod.find("x")
    assert back is not None
    assert back.namespaces == ["hoplab-x-a", "hoplab-x-b"]
    assert back.status == "building"
    assert [s.name for s in state_mod.all_states()] == ["x"]


def test_unreadable_state_is_skipped_not_fatal(labs_dir: Path) -> None:
    labs_dir.mkdir(parents=True)
    (labs_dir / "broken.json").write_text("{not json")
    LabState(name="ok", source="s").save()
    assert [s.name for s in state_mod.all_states()] == ["ok"]


def test_a_started_process_is_recorded_with_its_start_time(labs_dir: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        st = LabState(name="p", source="s")
        st.add_process(child.pid, ["sleep"], "r1", "sleeper")
        rec = state_mod.find("p")
        assert rec is not None
        assert rec.processes[0].pid == child.pid
        assert rec.processes[0].start == proc_start_time(child.pid)
        assert rec.processes[0].alive()
        stop_process(rec.processes[0])
        assert child.wait(timeout=5) is not None
        assert not rec.processes[0].alive()
    finally:
        child.kill()
        child.wait()


def stop_process(proc: Proc) -> None:
    """As `hoplab clean` stops a process of this machine that a record names."""
    NetnsExecutor(proc.node, None).stop_recorded(ProcessId(proc.node, proc.pid, proc.start))


# SIGTERM makes the main thread leave first and another thread 0.3 s later, as a Go
# daemon's may (wireguard-go): the process shows as a zombie before it can be reaped.
LEADER_FIRST = """
import ctypes, signal, threading, time
def on_term(*_):
    threading.Thread(target=time.sleep, args=(0.3,)).start()
    ctypes.CDLL(None).pthread_exit(None)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(30)
"""


def test_a_child_stopped_is_reaped_even_when_its_threads_end_after_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", LEADER_FIRST], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        start = proc_start_time(child.pid)
        assert start is not None
        stop_process(Proc(pid=child.pid, start=start, argv=["x"], node="n", role="r"))
        # Reaped by stop_recorded (a zombie keeps its /proc entry until it is).
        deadline = time.monotonic() + 2
        while Path(f"/proc/{child.pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not Path(f"/proc/{child.pid}").exists()
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()


def test_a_reused_pid_is_never_signalled() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = proc_start_time(child.pid)
        assert start is not None
        # The record says the PID started at another time: a different process.
        stale = Proc(pid=child.pid, start=start - 1, argv=["x"], node="n", role="r")
        assert not stale.alive()
        stop_process(stale)
        assert child.poll() is None, "a process hoplab did not start was killed"
    finally:
        child.kill()
        child.wait()


def test_recording_a_process_that_already_exited_fails(labs_dir: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    st = LabState(name="q", source="s")
    with pytest.raises(Exception, match="exited at once"):
        st.add_process(child.pid, ["x"], "n", "quick")


def testbatch_errors_name_the_failing_command() -> None:
    lines = ["link set lo up", "addr add 10.0.0.1/30 dev eth9"]
    msg = batch_error('Cannot find device "eth9"\nCommand failed -:2\n', lines)
    assert "addr add 10.0.0.1/30 dev eth9" in msg
    assert 'Cannot find device "eth9"' in msg


@pytest.mark.parametrize("text", ['{"name": "trunc', '{"name": "x", "bogus": 1}', "[1, 2]"])
def test_a_damaged_record_is_one_clear_error(labs_dir: Path, text: str) -> None:
    labs_dir.mkdir(parents=True)
    (labs_dir / "x.json").write_text(text)
    with pytest.raises(LabError, match=r"unreadable lab state .*hoplab clean removes it"):
        state_mod.find("x")


def test_the_owner_is_recorded_with_its_start_time(labs_dir: Path) -> None:
    LabState(name="o", source="s").save()
    rec = state_mod.find("o")
    assert rec is not None
    assert rec.owner_pid == os.getpid()
    assert rec.owner_start == proc_start_time(os.getpid())
    assert rec.owner_alive()


def test_an_owner_whose_pid_was_recycled_is_not_alive(labs_dir: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = proc_start_time(child.pid)
        assert start is not None
        same = LabState(name="a", source="s", owner_pid=child.pid, owner_start=start)
        assert same.owner_alive()
        # The PID is alive, but it is some other process than the one that built the lab.
        other = LabState(name="b", source="s", owner_pid=child.pid, owner_start=start - 1)
        assert not other.owner_alive()
    finally:
        child.kill()
        child.wait()
    assert not same.owner_alive()


def test_a_record_without_an_owner_start_time_has_no_live_owner(labs_dir: Path) -> None:
    labs_dir.mkdir(parents=True)
    (labs_dir / "old.json").write_text(json.dumps(
        {"name": "old", "source": "s", "owner_pid": os.getpid()}))
    rec = state_mod.find("old")
    assert rec is not None and rec.owner_start is None and not rec.owner_alive()
