"""Traffic, samplers, profiles, metadata, setup and teardown go through node executors
and never ask which kind they have: each runs here, end to end, on FakeExecutors
(kind "fake", nothing started), and the modules that moved onto the seam import no
namespace code and never read an executor's kind."""

from __future__ import annotations

import ast
import itertools
import json
import shutil
import signal
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hoplab.errors import HoplabError
from hoplab.lab.plan import Plan, plan_lab
from hoplab.lab.ready import node_settings, run_setup
from hoplab.lab.state import LabState
from hoplab.nodes import registry
from hoplab.nodes.executor import Executor, Facts, ProcessId, Snapshot
from hoplab.nodes.fake import FakeExecutor
from hoplab.nodes.procs import Proc
from hoplab.nodes.tracking import LOG_NAME
from hoplab.run.execute import run_test
from hoplab.run.flows import server_for
from hoplab.spec.experiment import Experiment
from hoplab.spec.experiment_loader import load_experiment
from tests.helpers.lab_text import chain3

SRC = Path(__file__).resolve().parents[2] / "src" / "hoplab"
DATA = Path(__file__).resolve().parents[1] / "data"

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
    # perf's files are taken away on r1, with the directory made for them, in one command.
    assert any(c[:3] == ["sh", "-c", 'rm -f "$@" && rmdir "$0"'] for c in nodes["r1"].calls)
    assert not any(c[0] == "rmdir" for c in nodes["r1"].calls)


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


def test_a_node_whose_facts_tell_its_settings_is_asked_nothing_more(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A device or a VM: its facts (one command) carry sysctls, offloads and qdiscs.
    plan = plan_lab(_experiment(tmp_path).variants[0].lab)
    nodes = {n.name: FakeExecutor(n.name) for n in plan.nodes}
    r1 = nodes["r1"]
    read: list[str] = []
    monkeypatch.setattr(r1, "read_file", lambda path, timeout=10.0: read.append(path))
    eth0 = plan.node("r1").ifaces[0].name
    told = {"sysctls": {"net.ipv4.ip_forward": "1"},
            "offloads": {eth0: {"generic-receive-offload": "off"}},
            "qdiscs": [{"kind": "fq_codel", "dev": eth0}]}
    r1.fact_values = Facts(values={"model": "x86 VM", **told})
    got = node_settings(plan, dict(nodes))
    assert {k: got["r1"][k] for k in told} == told
    assert r1.calls == [] and read == []
    # Facts without qdiscs (no tc on the device): those alone are read.
    r1.fact_values = Facts(values={k: told[k] for k in ("sysctls", "offloads")})
    r1.reply(["tc", "-j", "qdisc", "show"], stdout="[]")
    assert node_settings(plan, dict(nodes))["r1"]["qdiscs"] == []
    assert r1.calls == [["tc", "-j", "qdisc", "show"]]


def test_teardown_reaches_every_node_through_the_registry(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    made: dict[str, FakeExecutor] = {}

    def fake(node: str, info: object) -> FakeExecutor:
        return made.setdefault(node, FakeExecutor(node))

    monkeypatch.setitem(registry.KINDS, "fake", registry.NodeKind(fake))
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


def _replayed(plan: Plan, tmp_path: Path, port: int) -> dict[str, dict[str, str]]:
    """Each node's summary entry as a replay node, with what it will say."""
    entries = {}
    for n in plan.nodes:
        d = tmp_path / "replay" / n.name
        (d / "files" / "proc" / "net").mkdir(parents=True)
        entries[n.name] = {"kind": "replay", "dir": str(d)}
    client, r1, server = (tmp_path / "replay" / n for n in ("client", "r1", "server"))
    shutil.copy(DATA / "iperf3" / "tcp_upload.json", client / "iperf3.out")
    (server / "iperf3.out").write_text("")
    shutil.copy(DATA / "proc" / "net-dev-r1-tcp-load.txt", r1 / "files/proc/net/dev")
    shutil.copy(DATA / "proc" / "net-snmp-host.txt", r1 / "files/proc/net/snmp")
    # The server listens: its socket in the node's /proc/net/tcp (state 0A).
    (server / "files/proc/thread-self/net").mkdir(parents=True)
    (server / "files/proc/thread-self/net/tcp").write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid"
        f"\n   0: 00000000:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000"
        " 00000000     0\n")
    return entries


def test_a_new_kind_of_node_is_one_module_and_one_registry_entry(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A kind of node hoplab does not have (tests/unit/replay_node.py, which imports
    nothing of hoplab but the executor's interface and the client it inherits),
    registered with one line: a whole test runs on it, its samplers read its counters,
    lab status and teardown reach it."""
    from tests.unit import replay_node

    monkeypatch.setitem(registry.KINDS, "replay", registry.NodeKind(replay_node.make))

    exp = _experiment(tmp_path)
    test = replace(exp.variants[0].tests[0], profile=None)
    plan = plan_lab(replace(exp.variants[0].lab, name="seamreplay"))
    server = server_for(test.flows[0], 0, plan)
    assert server is not None
    state = LabState(name="seamreplay", source="lab.toml", namespaces=[])
    state.summary = {"nodes": _replayed(plan, tmp_path, server.port)}
    nodes = registry.state_executors(state)
    assert {type(ex).__name__ for ex in nodes.values()} == {"ReplayExecutor"}
    workdir = tmp_path / "work"
    workdir.mkdir()

    result = run_test(test, plan, workdir, nodes=nodes)

    assert result.errors == []
    goodput = {m.name: m.value for m in result.metrics if m.flow is None}
    assert goodput["goodput"] == pytest.approx(
        json.loads((DATA / "iperf3" / "tcp_upload.json").read_text())
        ["end"]["sum_received"]["bits_per_second"], rel=0.05)
    names = {(s.name, s.node) for s in result.series}
    assert ("iface.rx_bytes", "r1") in names and ("tcp.retrans_segs", "r1") in names
    assert result.notes["samplers_missing"] == "r1: qdisc: not recorded"
    # A node of a kind that is no namespace here: lab status neither enters nor asks it.
    from hoplab.lab.status import lab_status

    for entry in state.summary["nodes"].values():
        entry.update(netns=None, interfaces=[])
    status = lab_status(state)
    assert status["problems"] == [] and status["nodes"]["r1"]["present"]
    # Teardown reaches it through the registry too, and closes it.
    import hoplab.lab.teardown as td

    monkeypatch.setattr(LabState, "path", property(lambda _s: tmp_path / "state.json"))
    monkeypatch.setattr(LabState, "rundir", property(lambda _s: tmp_path / "run"))
    made: list[replay_node.ReplayExecutor] = []

    def keep(node: str, entry: Mapping[str, Any]) -> replay_node.ReplayExecutor:
        made.append(replay_node.make(node, entry))
        return made[-1]

    monkeypatch.setitem(registry.KINDS, "replay", registry.NodeKind(keep))
    assert td.teardown(state) == []
    assert sorted(ex.node for ex in made if ex.closed) == ["client", "r1", "server"]


def test_the_new_kind_is_one_module_on_the_executor_and_its_client() -> None:
    path = Path(__file__).with_name("replay_node.py")
    hoplab = {m for _line, m in _runtime_imports(ast.parse(path.read_text()))
              if m.startswith("hoplab")}
    assert hoplab <= {"hoplab.nodes.executor", "hoplab.nodes.client",
                      "hoplab.nodes.client.Client"} | {
        f"hoplab.nodes.executor.{n}" for n in ("Completed", "ExecutorError", "Facts",
                                               "LineChannel", "Process", "ProcessId",
                                               "Snapshot")}
    from tests.unit import replay_node

    # mypy checks this assignment against the Protocol; isinstance checks the names.
    ex: Executor = replay_node.make("r1", {"dir": "/nonexistent"})
    assert isinstance(ex, Executor)


def test_an_unknown_node_kind_is_named() -> None:
    with pytest.raises(HoplabError, match="node r9: unknown node kind 'telnet'"):
        registry.executor_for("r9", {"kind": "telnet"})


def test_a_node_without_a_kind_is_a_namespace() -> None:
    ex = registry.executor_for("r1", {"netns": "hoplab-x-r1"})
    assert (ex.kind, ex.node, ex.machine) == ("netns", "r1", "local")


# Every module of hoplab outside nodes/: none asks which kind a node is, none makes an
# executor but through the registry, none enters a namespace but through the executor.
OUTSIDE = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                 if p.relative_to(SRC).parts[0] != "nodes")
# The executors' implementations, which only the registry makes.
IMPLEMENTATIONS = {f"hoplab.nodes.{m}" for m in (
    "netns_exec", "ssh_exec", "ssh_conn", "ssh_counters", "ssh_facts", "ssh_target",
    "ssh_quote", "fake")}
EXECUTOR_NAMES = ("ex", "executor", "nodes")
# A lab file's node (spec's Node), or its entry: its kind is for the registry to read.
SPEC_NAMES = ("node", "n", "spec")


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _runtime_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import outside `if TYPE_CHECKING:` blocks."""
    parents = _parents(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        up = parents.get(node)
        while up is not None and not (isinstance(up, ast.If) and "TYPE_CHECKING" in
                                      ast.unparse(up.test)):
            up = parents.get(up)
        if up is None:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            out += [(node.lineno, n) for n in names]
    return out


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def _kind_for_the_registry(attr: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> bool:
    """A node's .kind handed to the registry (kind(n.kind): its entry, which the node
    also carries as n.node_kind) or written as the "kind" of its entry; anything else
    asks which kind it is."""
    up = parents.get(attr)
    if isinstance(up, ast.Call) and _name(up.func) == "kind" and up.args == [attr]:
        return True
    return isinstance(up, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "kind" and v is attr
        for k, v in zip(up.keys, up.values, strict=True))


def kind_questions(rel: str, source: str) -> list[str]:
    """Where module `rel` asks which kind a node is, or makes an executor itself."""
    tree = ast.parse(source, rel)
    parents = _parents(tree)
    out = [f"{rel}:{line} imports {module}: executors come from hoplab.nodes.registry"
           for line, module in _runtime_imports(tree) if module in IMPLEMENTATIONS]
    kinds = {*registry.KINDS, "fake"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.Eq | ast.NotEq)
                                                 for op in node.ops):
            named = {c.value for c in (node.left, *node.comparators)
                     if isinstance(c, ast.Constant)}
            if kinds & named:
                out.append(f"{rel}:{node.lineno} compares with a node kind")
        if isinstance(node, ast.Attribute) and node.attr == "is_device":
            out.append(f"{rel}:{node.lineno} asks is_device")
        if isinstance(node, ast.Attribute) and node.attr == "kind":
            base = node.value
            spec_like = _name(base) in SPEC_NAMES or (
                isinstance(base, ast.Call) and _name(base.func) == "node")
            if _name(base) in EXECUTOR_NAMES:
                out.append(f"{rel}:{node.lineno} reads an executor's kind")
            elif spec_like and not _kind_for_the_registry(node, parents):
                out.append(f"{rel}:{node.lineno} reads a node's kind, not for the registry")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "hasattr") and node.args \
                and _name(node.args[0]) in (*EXECUTOR_NAMES, "node"):
            # A call reached by getattr/hasattr on an executor is outside the Protocol:
            # mypy cannot check it and a new kind of node would silently skip it.
            out.append(f"{rel}:{node.lineno} {node.func.id} on an executor")
    return out


def own_ways_into_a_namespace(rel: str, source: str) -> list[str]:
    """Where module `rel` runs something in a namespace but through its executor
    (NetnsExecutor): `ip netns exec`, `ip -n`, a thread's setns() of its own. Only
    `hoplab lab exec` builds the `ip netns exec` argv it execs in place (lab/where.py,
    cli/lab.py); above the lab engine, no module knows namespaces at all."""
    tree = ast.parse(source, rel)
    in_lab = rel.startswith("lab/")
    out = []
    for line, module in _runtime_imports(tree):
        if module.endswith(("netns.entered", "netns._setns")):
            out.append(f"{rel}:{line} imports {module}")
        if not in_lab and module in ("hoplab.nodes.netns", "hoplab.lab.netns"):
            out.append(f"{rel}:{line} imports {module}")
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple):
            words = [str(e.value) if isinstance(e, ast.Constant) else _name(e)
                     for e in node.elts]
            for a, b in itertools.pairwise(words):
                if (a, b) == ("netns", "exec") or (a in ("ip", "tc") and b == "-n"):
                    out.append(f"{rel}:{node.lineno} {a} {b}")
        if isinstance(node, ast.Call) and _name(node.func) in ("entered", "setns"):
            out.append(f"{rel}:{node.lineno} enters a namespace itself")
        if isinstance(node, ast.Call) and _name(node.func) == "exec_argv" \
                and rel not in ("lab/where.py", "cli/lab.py"):
            out.append(f"{rel}:{node.lineno} builds an ip netns exec argv")
        if isinstance(node, ast.Attribute) and not in_lab and node.attr in ("netns", "popen"):
            out.append(f"{rel}:{node.lineno} .{node.attr}")
    return out


@pytest.mark.parametrize("rel", OUTSIDE)
def test_no_module_outside_nodes_asks_which_kind_of_node(rel: str) -> None:
    assert kind_questions(rel, (SRC / rel).read_text()) == []


@pytest.mark.parametrize("rel", OUTSIDE)
def test_one_way_into_a_namespace(rel: str) -> None:
    assert own_ways_into_a_namespace(rel, (SRC / rel).read_text()) == []


def test_the_checks_see_what_they_look_for() -> None:
    """Lines as the code had them before the seam held are each found."""
    asks = """
from hoplab.nodes.netns_exec import NetnsExecutor
if info.get("kind") == "ssh":
    local = [n for n in plan.nodes if not lab.node(n.name).is_device]
if ex.kind != "netns" or hasattr(ex, "uptime"):
    pass
role = plan.lab.node(name).kind
"""
    assert sorted(kind_questions("lab/x.py", asks)) == [
        "lab/x.py:2 imports hoplab.nodes.netns_exec: executors come from "
        "hoplab.nodes.registry",
        "lab/x.py:3 compares with a node kind", "lab/x.py:4 asks is_device",
        "lab/x.py:5 compares with a node kind", "lab/x.py:5 hasattr on an executor",
        "lab/x.py:5 reads an executor's kind",
        "lab/x.py:7 reads a node's kind, not for the registry"]
    assert kind_questions("lab/x.py", "ok = kind(lab.node(n).kind).local\n") == []
    assert kind_questions("lab/x.py", "ok = lab.node(n).node_kind.local\n") == []
    ways = """
from hoplab.lab import netns
res = subprocess.run(["ip", "netns", "exec", iface.netns, "wg", "show"])
ok = _batch([ip, "-n", ns], lines)
with netns.entered(ns):
    argv = where.exec_argv(ns, cmd)
"""
    assert sorted(own_ways_into_a_namespace("run/x.py", ways)) == [
        "run/x.py:2 imports hoplab.lab.netns", "run/x.py:3 .netns", "run/x.py:3 netns exec",
        "run/x.py:4 ip -n", "run/x.py:5 enters a namespace itself",
        "run/x.py:6 builds an ip netns exec argv"]


def test_every_kind_answers_whether_it_rebooted() -> None:
    from hoplab.nodes.netns_exec import NetnsExecutor

    fake = FakeExecutor("r1")
    fake.reboot_answers = [True]
    for ex in (NetnsExecutor("r1", "hoplab-x-r1"), fake):
        assert isinstance(ex, Executor)
    # A namespace shares this machine's kernel: never rebooted under a running hoplab.
    assert NetnsExecutor("r1", "hoplab-x-r1").check_rebooted() is False
    assert (fake.check_rebooted(), fake.check_rebooted()) == (True, False)
