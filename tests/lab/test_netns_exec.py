"""The namespace executor in a real lab: commands, files and counters are the node's
own; a test's processes are in the lab's record while they run, and a teardown
after hoplab was SIGKILLed stops exactly those, by their record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hoplab.errors import HoplabError
from hoplab.lab import wire
from hoplab.lab.state import find
from hoplab.lab.teardown import teardown
from hoplab.nodes.executor import ExecutorError
from hoplab.nodes.netns_exec import NetnsExecutor
from hoplab.nodes.procs import proc_start_time
from hoplab.nodes.registry import executors, wire_executors
from hoplab.nodes.tracking import ProcessRecord, recorded
from hoplab.run.procs import ProcessGroup
from hoplab.samplers import Samplers, Target
from tests.helpers.lab import EXAMPLES, LabUp, wire_written_since

pytestmark = pytest.mark.root


def test_commands_files_and_counters_are_the_nodes(lab_up: LabUp, tmp_path: Path) -> None:
    up = lab_up(path=EXAMPLES / "chain.toml")
    nodes = executors(up.plan)
    client, r1 = nodes["client"], nodes["r1"]
    addr = str(up.plan.node("client").primary4)
    assert addr in client.run(["ip", "-o", "addr", "show"]).stdout
    assert addr not in r1.run(["ip", "-o", "addr", "show"]).stdout
    assert r1.read_file("/proc/sys/net/ipv4/ip_forward") == b"1\n"
    assert client.read_file("/proc/sys/net/ipv4/ip_forward") == b"0\n"
    src = r1.counters(frozenset({"ifaces", "qdisc", "tcp"}))
    try:
        snap = src.read()
    finally:
        src.close()
    assert snap.net_dev is not None
    assert {i.name for i in up.plan.node("r1").ifaces} <= set(
        line.split(":")[0].strip() for line in snap.net_dev.splitlines()[2:])
    assert snap.qdiscs and any(q.kind == "htb" for q in snap.qdiscs)
    # A process started on a node lives in its namespace, and only there.
    proc = client.start("sleeper", ["sleep", "30"], out=tmp_path / "o", err=tmp_path / "e")
    try:
        # `ip netns exec` enters the namespace, then execs the tool: a moment later.
        deadline = time.monotonic() + 10
        while proc.ident.pid not in (client.pids() or set()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.ident.pid in (client.pids() or set())
        assert proc.ident.pid not in (r1.pids() or set())
    finally:
        client.close()
    assert proc.poll() is not None


def test_a_missing_namespace_is_an_executor_error() -> None:
    ghost = NetnsExecutor("ghost", "hoplab-nosuchlab-ghost")
    with pytest.raises(ExecutorError, match="node ghost: network namespace "
                                            "hoplab-nosuchlab-ghost does not exist"):
        ghost.run(["true"])
    with pytest.raises(HoplabError, match="does not exist"):
        ghost.counters(frozenset({"ifaces"}))


_CRASH = """
import os, signal, sys
from pathlib import Path
from hoplab.lab.state import find
from hoplab.lab.plan import plan_lab
from hoplab.spec import load_lab
from hoplab.nodes.registry import executors
from hoplab.run.procs import ProcessGroup
plan = plan_lab(load_lab(Path(sys.argv[2]), name=sys.argv[1]))
group = ProcessGroup(Path(sys.argv[3]), executors(plan), sys.argv[1])
proc = group.start("server crash", "server", ["sleep", "300"])
print(proc.process.ident.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_teardown_after_sigkill_stops_the_recorded_processes(lab_up: LabUp,
                                                               tmp_path: Path) -> None:
    up = lab_up(path=EXAMPLES / "chain.toml")
    crashed = subprocess.run([sys.executable, "-c", _CRASH, up.name,
                              str(EXAMPLES / "chain.toml"), str(tmp_path)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    pid = int(crashed.stdout.split()[0])
    state = find(up.name)
    assert state is not None
    (rec,) = [p for p in recorded(state) if p.role == "test: server crash"]
    assert (rec.node, rec.pid, rec.start) == ("server", pid, proc_start_time(pid))
    assert rec.argv == ["sleep", "300"]
    warnings = teardown(state)
    # Stopped by its record (SIGTERM), not found later as a leftover in the namespace.
    assert not [w for w in warnings if str(pid) in w], warnings
    assert proc_start_time(pid) is None


def test_a_finished_test_leaves_no_process_in_the_record(lab_up: LabUp,
                                                         tmp_path: Path) -> None:
    up = lab_up(path=EXAMPLES / "chain.toml")
    state = find(up.name)
    assert state is not None
    before = len(recorded(state))
    group = ProcessGroup(tmp_path, executors(up.plan), up.name)
    proc = group.start("client x", "client", ["sleep", "30"])
    assert [p.pid for p in recorded(state)][before:] == [proc.process.ident.pid]
    began = time.monotonic()
    group.stop_all()
    assert time.monotonic() - began < 3
    assert len(recorded(state)) == before
    assert not os.path.exists(f"/proc/{proc.process.ident.pid}/stat") \
        or proc_start_time(proc.process.ident.pid) is None


def test_a_wires_counters_are_sampled_through_its_namespace(lab_up: LabUp) -> None:
    up = lab_up('name = "x"\n[nodes.a]\n[nodes.b]\n'
                '[[links]]\nbetween = ["a", "b"]\nemulator = "wire"\n')
    wires = wire_executors(find(up.name))
    assert list(wires) == ["w.0"] and wires["w.0"].kind == "netns"
    zero = time.time()
    with Samplers([Target("w.0", wires["w.0"], frozenset({"wire"}))], cpu=False,
                  clock_zero=zero, interval_s=0.1) as smp:
        done = up.run("a", "ping", "-c", "20", "-i", "0.02", "b")
        # The wire's next counters after the pings, then a sample of them.
        wire_written_since(wire.netns_name(up.name, 0), time.time())
        assert smp.sampled_since(time.time() - zero, 10)
    series = smp.stop()
    assert smp.errors == [] and smp.missing == []
    assert done.returncode == 0, done.stdout
    passed = {s.key: s for s in series if (s.name, s.node) == ("wire.passed", "w.0")}
    assert set(passed) == {"forward", "reverse"}
    # 20 echo requests forward, 20 replies back (and a few neighbour messages).
    for s in passed.values():
        assert 20 <= s.v[-1] - s.v[0] <= 26, (s.key, s.v[0], s.v[-1])


def test_two_records_of_one_lab_keep_each_others_processes(lab_up: LabUp,
                                                           tmp_path: Path) -> None:
    # A test's tools and its perf are recorded by two ProcessRecords of one lab.
    up = lab_up(path=EXAMPLES / "chain.toml")
    nodes = executors(up.plan)
    tools, perf = ProcessRecord(up.name), ProcessRecord(up.name)
    a = nodes["client"].start("a", ["sleep", "30"], out=tmp_path / "a", err=tmp_path / "ae")
    b = nodes["r1"].start("b", ["sleep", "30"], out=tmp_path / "b", err=tmp_path / "be")
    try:
        tools.started(a, "test: a")
        perf.started(b, "profile: b")
        state = find(up.name)
        assert state is not None
        roles = {p.role for p in recorded(state)}
        assert {"test: a", "profile: b"} <= roles
        tools.stopped([a.ident])
        roles = {p.role for p in recorded(state)}
        assert "test: a" not in roles and "profile: b" in roles
    finally:
        nodes["client"].close()
        nodes["r1"].close()
