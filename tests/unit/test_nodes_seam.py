"""Traffic, samplers, profiles, metadata, setup and teardown go through node executors
and never ask which kind they have: each runs here, end to end, on FakeExecutors
(kind "fake", nothing started), and the modules that moved onto the seam import no
namespace code and never read an executor's kind."""

from __future__ import annotations

import ast
import json
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from hoplab.errors import HoplabError
from hoplab.lab.plan import Plan, plan_lab
from hoplab.lab.state import LabState
from hoplab.nodes import registry
from hoplab.nodes.executor import Executor, Facts, ProcessId, Snapshot
from hoplab.nodes.fake import FakeExecutor
from hoplab.nodes.procs import Proc
from hoplab.nodes.tracking import LOG_NAME
from hoplab.run.execute import run_test
from hoplab.run.experiment import run_setup
from hoplab.run.flows import server_for
from hoplab.run.metadata import node_settings
from hoplab.spec.experiment import Experiment
from hoplab.spec.experiment_loader import load_experiment
from tests.helpers.lab_text import chain3

SRC = Path(__file__).resolve().parents[2] / "src" / "hoplab"
DATA = Path(__file__).resolve().parents[1] / "data"
ON_THE_SEAM = ("run/procs.py", "run/execute.py", "run/experiment.py", "run/metadata.py",
               "run/profiling.py", "profile/record.py", "samplers/runner.py",
               "lab/teardown.py")

LAB = chain3("seam", ipv6=False)

EXPERIMENT = """
lab = "lab.toml"
seed = 1
[matrix.mode.on]
"setup.r1" = [["sh", "qos.sh", "{iface:server}"], ["tc", "qdisc", "show"]]
[profile]
nodes = ["r1"]
frequency = 99
[[tests]]
name = "bulk"
kind = "tcp"
from = "client"
to = "server"
duration = "1s"
samplers = { nodes = ["r1"], kinds = ["ifaces", "qdisc", "tcp"], interval = "50ms" }
"""


def _experiment(tmp_path: Path) -> Experiment:
    (tmp_path / "lab.toml").write_text(LAB)
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    return load_experiment(tmp_path / "exp.toml")


def _stat(extra: int) -> str:
    """/proc/stat of a device, `extra` ticks of softirq later on every row."""
    out = []
    for line in (DATA / "proc" / "stat-tcp-load.txt").read_text().splitlines():
        f = line.split()
        if f and f[0].startswith("cpu"):
            f[7] = str(int(f[7]) + extra)  # softirq
            f[4] = str(int(f[4]) + extra)  # idle
        out.append(" ".join(f))
    return "\n".join(out) + "\n"


def _fakes(plan: Plan, workdir: Path) -> dict[str, FakeExecutor]:
    nodes = {n.name: FakeExecutor(n.name) for n in plan.nodes}
    nodes["client"].outputs["iperf3"] = (DATA / "iperf3" / "tcp_upload.json").read_bytes()
    nodes["client"].runs_for = 0.3
    r1 = nodes["r1"]
    r1.runs_for = 60.0  # perf runs until it is told to stop
    net_dev = (DATA / "proc" / "net-dev-r1-tcp-load.txt").read_text()
    snmp = (DATA / "proc" / "net-snmp-host.txt").read_text()
    # A device: its own CPUs (proc_stat), no tc (qdiscs missing, with the reason).
    r1.snapshots = [Snapshot(proc_stat=_stat(0), net_dev=net_dev, snmp=snmp,
                             missing={"qdisc": "tc is not installed on r1"},
                             extra=[("sampler.cpu", "%", None, 0.4)]),
                    Snapshot(proc_stat=_stat(10), net_dev=net_dev, snmp=snmp,
                             missing={"qdisc": "tc is not installed on r1"},
                             extra=[("sampler.cpu", "%", None, 0.5)])]
    r1.files[str(workdir / "bulk.perf.script")] = \
        (DATA / "profile" / "burner.perf-script.txt").read_bytes()
    return nodes


@pytest.mark.parametrize("whole_machine", [False, True], ids=["namespace", "device"])
def test_a_test_runs_end_to_end_on_fake_nodes(tmp_path: Path, whole_machine: bool) -> None:
    exp = _experiment(tmp_path)
    variant = exp.variants[0]
    test = variant.tests[0]
    plan = plan_lab(replace(variant.lab, name="seamfake"))
    workdir = tmp_path / "work"
    workdir.mkdir()
    nodes = _fakes(plan, workdir)
    nodes["r1"].whole_machine = whole_machine
    server = server_for(test.flows[0], 0, plan)
    assert server is not None
    # The server listens: its socket in the node's /proc/net/tcp (state 0A).
    nodes[server.node].files["/proc/thread-self/net/tcp"] = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid"
        f"\n   0: 00000000:{server.port:04X} 00000000:0000 0A 00000000:00000000 00:00000000"
        " 00000000     0\n").encode()
    as_executors: dict[str, Executor] = dict(nodes)

    result = run_test(test, plan, workdir, nodes=as_executors)

    assert result.errors == []
    # Traffic: the server and the client started on their nodes, and were stopped.
    (srv,) = nodes["server"].started
    (cli,) = nodes["client"].started
    assert srv.argv[:2] == ["iperf3", "-s"] and cli.argv[:2] == ["iperf3", "-c"]
    assert {p.name for p in nodes["server"].stopped} == {srv.name}
    goodput = {m.name: m.value for m in result.metrics if m.flow is None}
    assert goodput["goodput"] > 0
    # Samplers: r1's counters, its own CPU (a device's), its extra series; what it
    # could not give is said, and nothing of it is stored as zero.
    names = {(s.name, s.node) for s in result.series}
    assert ("iface.rx_bytes", "r1") in names and ("tcp.retrans_segs", "r1") in names
    assert ("cpu.softirq", "r1") in names and ("sampler.cpu", "r1") in names
    assert not any(s.name.startswith("qdisc.") for s in result.series)
    assert result.notes["samplers_missing"] == "r1: qdisc: tc is not installed on r1"
    soft = next(s for s in result.series if (s.name, s.node, s.key) ==
                ("cpu.softirq", "r1", "all"))
    assert soft.v[0] == pytest.approx(50.0)  # 10 ticks of softirq, 10 idle
    # Profile: perf recorded on r1, stopped with SIGINT, its script folded.
    (perf,) = nodes["r1"].started
    assert perf.argv[:2] == ["/usr/bin/perf", "record"] and signal.SIGINT in perf.signals
    assert result.profile is not None and result.profile["status"] == "ok", result.profile
    assert result.profile["samples"] > 0
    r1 = result.profile["by_node"]["r1"]
    if whole_machine:
        # perf ran on the device: every sample is the device's, and the profile says so.
        assert result.profile["attribution"].startswith(
            "device-wide: perf ran on r1 itself and sampled all of its CPUs")
        assert "host-wide" not in result.profile["attribution"]
        assert r1["whole_machine"] and r1["samples"] == result.profile["samples"]
        assert r1["share_of_host"] == pytest.approx(100.0)
    else:
        # perf runs on r1 (in its namespace, on this machine) but is not r1's own work.
        assert result.profile["attribution"].startswith("host-wide: a lab's nodes share")
        assert r1["pids"] == [] and not r1["whole_machine"] and r1["samples"] == 0
    # The device sampler's own cost is summarised: the mean of its two intervals' shares.
    cost = [m for m in result.metrics if m.name == "sampler.cpu"]
    assert [(m.node, m.unit) for m in cost] == [("r1", "%")]
    assert any(c[:2] == ["rm", "-f"] for c in nodes["r1"].calls)


def test_setup_commands_run_on_their_node_in_the_experiments_directory(
        tmp_path: Path) -> None:
    exp = _experiment(tmp_path)
    variant = exp.variants[0]
    plan = plan_lab(variant.lab)
    nodes = {n.name: FakeExecutor(n.name) for n in plan.nodes}
    run_setup(variant, plan, dict(nodes), tmp_path)
    iface = next(i.name for i in plan.node("r1").ifaces if i.peer == "server")
    assert nodes["r1"].calls == [["sh", "qos.sh", iface], ["tc", "qdisc", "show"]]
    assert nodes["r1"].cwds == [str(tmp_path)] * 2
    assert nodes["client"].calls == []
    # A missing command and a failing one are the run's error, naming node and command.
    nodes["r1"].reply(["sh", "qos.sh", iface], returncode=127,
                      stderr="sh: command not found")
    with pytest.raises(HoplabError, match=r"setup\.r1: command not found: sh"):
        run_setup(variant, plan, dict(nodes), tmp_path)
    nodes["r1"].reply(["sh", "qos.sh", iface], returncode=126,
                      stderr="sh: qos.sh: Permission denied")
    with pytest.raises(HoplabError, match=r"setup\.r1: cannot run sh: Permission denied"):
        run_setup(variant, plan, dict(nodes), tmp_path)
    nodes["r1"].reply(["sh", "qos.sh", iface], returncode=3, stderr="no such qdisc")
    with pytest.raises(HoplabError, match=r"setup\.r1: sh qos.sh .* exited 3: no such qdisc"):
        run_setup(variant, plan, dict(nodes), tmp_path)


def test_node_settings_come_from_each_nodes_executor(tmp_path: Path) -> None:
    plan = plan_lab(_experiment(tmp_path).variants[0].lab)
    nodes = {n.name: FakeExecutor(n.name) for n in plan.nodes}
    r1 = nodes["r1"]
    r1.files["/proc/sys/net/ipv4/ip_forward"] = b"1\n"
    r1.files["/proc/sys/net/ipv4/tcp_rmem"] = b"4096\t131072\t6291456\n"
    eth0 = plan.node("r1").ifaces[0].name
    r1.reply(["ethtool", "-k", eth0],
             stdout="Features for eth0:\ngeneric-receive-offload: on\n"
                    "tcp-segmentation-offload: off [fixed]\nhighdma: on\n")
    r1.reply(["tc", "-j", "qdisc", "show"],
             stdout=json.dumps([{"kind": "noqueue", "dev": "lo"},
                                {"kind": "tbf", "dev": eth0}]))
    r1.fact_values = Facts(values={"model": "Netgear R7000", "firmware": "OpenWrt 23.05"},
                           missing={"perf": "not installed"})
    got = node_settings(plan, dict(nodes))
    assert set(got) == {"client", "r1", "server"}
    r1s = got["r1"]
    assert r1s["sysctls"] == {"net.ipv4.ip_forward": "1",
                              "net.ipv4.tcp_rmem": "4096 131072 6291456"}
    assert r1s["offloads"][eth0] == {"generic-receive-offload": "on",
                                     "tcp-segmentation-offload": "off"}
    assert r1s["qdiscs"] == [{"kind": "tbf", "dev": eth0}]
    assert r1s["model"] == "Netgear R7000" and r1s["missing"] == {"perf": "not installed"}
    assert got["client"] == {"sysctls": {}, "offloads": {
        i.name: {} for i in plan.node("client").ifaces}, "qdiscs": []}


def test_teardown_reaches_every_node_through_the_registry(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    made: dict[str, FakeExecutor] = {}

    def fake(node: str, info: object) -> FakeExecutor:
        return made.setdefault(node, FakeExecutor(node))

    monkeypatch.setitem(registry.KINDS, "fake", registry.NodeKind(fake, local=False))
    from hoplab.lab import teardown as td

    state = LabState(name="seamtd", source="lab.toml", namespaces=[])
    state.summary = {"nodes": {
        "router": {"kind": "fake", "teardown": [["nft", "flush", "ruleset"]]},
        "server": {"kind": "fake", "teardown": []}}}
    state.processes = [Proc(4242, 777, ["iperf3", "-s"], "router", "test: server x")]
    monkeypatch.setattr(LabState, "path", property(lambda _s: tmp_path / "state.json"))
    monkeypatch.setattr(LabState, "rundir", property(lambda _s: tmp_path / "run"))
    made_router = fake("router", {})
    made_router.reply(["nft", "flush", "ruleset"], returncode=1, stderr="nft: no such table")
    # The tests' processes log: one stopped, one still running, a line cut short.
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOG_NAME).write_text(
        '{"op": "started", "node": "server", "pid": 5, "start": 50, "argv": ["a"], '
        '"role": "test: a"}\n'
        '{"op": "started", "node": "server", "pid": 6, "start": 60, "argv": ["b"], '
        '"role": "test: b"}\n'
        '{"op": "stopped", "node": "server", "pid": 5, "start": 50}\n'
        '{"op": "started", "node": "ser')
    warnings = td.teardown(state)
    assert made["router"].calls == [["nft", "flush", "ruleset"]]
    assert made["router"].stopped_recorded == [ProcessId("router", 4242, 777)]
    assert made["server"].stopped_recorded == [ProcessId("server", 6, 60)]
    assert made["router"].closed and made["server"].closed
    assert warnings == ["node router: teardown nft flush ruleset: exit 1: nft: no such table"]


def test_an_unknown_node_kind_is_named() -> None:
    with pytest.raises(HoplabError, match="node r9: unknown node kind 'telnet'"):
        registry.executor_for("r9", {"kind": "telnet"})


def test_a_node_without_a_kind_is_a_namespace() -> None:
    ex = registry.executor_for("r1", {"netns": "hoplab-x-r1"})
    assert (ex.kind, ex.node, ex.machine) == ("netns", "r1", "local")


@pytest.mark.parametrize("rel", ON_THE_SEAM)
def test_the_moved_modules_never_ask_which_kind_of_node(rel: str) -> None:
    tree = ast.parse((SRC / rel).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            # teardown deletes the lab's namespaces, which are its own business.
            if rel != "lab/teardown.py":
                assert node.module != "hoplab.lab.netns", f"{rel} imports the namespace code"
            assert node.module not in ("hoplab.nodes.ssh_exec", "hoplab.nodes.fake")
        if isinstance(node, ast.Attribute):
            assert node.attr not in ("kind",) or not _on_executor(node), \
                f"{rel}:{node.lineno} reads an executor's kind"
            assert node.attr not in ("netns", "popen"), f"{rel}:{node.lineno} .{node.attr}"


@pytest.mark.parametrize("rel", (*ON_THE_SEAM, "lab/devices.py"))
def test_what_an_executor_can_do_is_its_protocol_not_a_getattr(rel: str) -> None:
    # A call reached by getattr/hasattr on an executor is outside the Protocol: mypy
    # cannot check it and a new kind of node would silently skip it.
    for node in ast.walk(ast.parse((SRC / rel).read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "hasattr") and node.args \
                and isinstance(node.args[0], ast.Name) \
                and node.args[0].id in ("ex", "node", "executor", "nodes"):
            raise AssertionError(f"{rel}:{node.lineno} {node.func.id} on an executor")


def test_every_kind_answers_whether_it_rebooted() -> None:
    from hoplab.nodes.netns_exec import NetnsExecutor

    fake = FakeExecutor("r1")
    fake.reboot_answers = [True]
    for ex in (NetnsExecutor("r1", "hoplab-x-r1"), fake):
        assert isinstance(ex, Executor)
    # A namespace shares this machine's kernel: never rebooted under a running hoplab.
    assert NetnsExecutor("r1", "hoplab-x-r1").check_rebooted() is False
    assert (fake.check_rebooted(), fake.check_rebooted()) == (True, False)


def _on_executor(node: ast.Attribute) -> bool:
    # flow.kind, test.kind and rec.kind are a test's kind, not a node's.
    base = node.value
    name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
    return name in ("ex", "node", "executor", "nodes")
