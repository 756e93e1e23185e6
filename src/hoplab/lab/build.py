"""Bring a planned lab up in network namespaces, and take it down again.

Order matters for speed and for safety: the state record is written before
anything exists; namespaces are created in one `ip -batch`; sysctls that
new interfaces inherit (no IPv6 DAD) are set before the veths arrive in a
second root `ip -batch`; then each namespace is configured by one `ip -batch`
and one `tc -batch` run from a thread that has entered it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from hoplab.errors import CapabilityError, LabError, UsageError
from hoplab.lab import devices, netns, wire, wireguard
from hoplab.lab.caps import Capabilities, probe
from hoplab.lab.lock import lab_lock
from hoplab.lab.plan import Iface, NodePlan, Plan, hosts_file, plan_lab, unresolved
from hoplab.lab.requirements import (
    impairment_backend,
    link_disciplines,
    requirements_problems,
)
from hoplab.lab.shaping import tc_lines
from hoplab.lab.signals import shielded, terminate_as_interrupt
from hoplab.lab.state import ETC_NETNS, LabState, find
from hoplab.lab.summary import summarize
from hoplab.lab.teardown import check_done, teardown
from hoplab.lab.where import netns_prefix
from hoplab.nodes.executor import Executor
from hoplab.spec.model import Lab

Progress = Callable[[str], None]


@dataclass
class UpResult:
    state: LabState
    plan: Plan
    seconds: float
    steps: dict[str, float] = field(default_factory=dict)


# Linux starts packets with TTL 64: a reply across more hops than that dies
# on its way back, so deeper labs start theirs at the maximum.
DEFAULT_TTL = 64


def _base_sysctls(node: NodePlan, diameter: int) -> list[tuple[str, str]]:
    fwd = "1" if node.forward else "0"
    deep = [("net.ipv4.ip_default_ttl", "255"), ("net.ipv6.conf.default.hop_limit", "255"),
            ("net.ipv6.conf.all.hop_limit", "255")] if diameter >= DEFAULT_TTL else []
    return [
        *deep,
        # Interfaces created later inherit "default"; without this every IPv6
        # address would sit tentative for a second of duplicate detection.
        ("net.ipv6.conf.default.accept_dad", "0"),
        ("net.ipv6.conf.all.accept_dad", "0"),
        ("net.ipv6.conf.default.accept_ra", "0"),
        ("net.ipv4.ip_forward", fwd),
        ("net.ipv6.conf.all.forwarding", fwd),
    ]


def _veth_lines(plan: Plan, wires: dict[int, wire.WireLink] | None = None) -> list[str]:
    ends: dict[int, list[tuple[NodePlan, Iface]]] = {}
    for node in plan.nodes:
        for i in node.ifaces:
            if i.kind == "veth" and i.link is not None:
                ends.setdefault(i.link, []).append((node, i))
    lines = []
    for index in sorted(ends):
        (na, ia), (nb, ib) = ends[index]
        w = (wires or {}).get(index)
        if w is not None:
            lines += wire.veth_lines(w, (na.netns, ia.name), (nb.netns, ib.name), ia.mtu)
            continue
        mtu = f" mtu {ia.mtu}" if ia.mtu else ""
        lines.append(f"link add {ia.name} netns {na.netns}{mtu} type veth "
                     f"peer name {ib.name} netns {nb.netns}{mtu}")
    return lines


def _ip_lines(node: NodePlan, kinds: tuple[str, ...]) -> list[str]:
    lines = ["link set lo up"] if "veth" in kinds else []
    devs = {i.name for i in node.ifaces if i.kind in kinds}
    for i in node.ifaces:
        if i.kind not in kinds:
            continue
        if i.kind in ("veth", "nic"):
            lines.append(f"link set {i.name} up")
        for a in i.addrs:
            flag = " nodad" if a.version == 6 else ""
            lines.append(f"addr add {a.with_prefixlen} dev {i.name}{flag}")
    for r in node.routes:
        if r.dev in devs:
            lines.append(f"route add {r.dst} via {r.gateway} dev {r.dev} proto static")
    return lines


def _configure_veths(lab: Lab, node: NodePlan, wired: frozenset[int] = frozenset()) -> None:
    what = f"node {node.name}"
    netns.ip_batch(_ip_lines(node, ("veth", "nic")), what)
    tc: list[str] = []
    for i in node.ifaces:
        if i.kind == "veth" and i.link not in wired:
            tc += tc_lines(i.name, i.egress)
    netns.tc_batch(tc, what)
    for i in node.ifaces:
        if i.kind == "veth" and i.link in wired and wire.per_packet(i.egress):
            # Loss, duplication and jitter act per packet: the wire must see
            # packets, not the 64 KiB GSO super-frames this sender would hand it.
            check_done(subprocess.run(["ethtool", "-K", i.name, "tso", "off", "gso", "off"],
                                      capture_output=True, text=True, check=False),
                       f"{what}: offloads off on {i.name} (wired link)")
    spec = lab.node(node.name)
    if spec.offloads:
        for i in node.ifaces:
            if i.kind != "veth":
                continue
            argv = ["ethtool", "-K", i.name]
            for feat, on in spec.offloads:
                argv += [feat, "on" if on else "off"]
            check_done(subprocess.run(argv, capture_output=True, text=True, check=False),
                   f"{what}: offloads on {i.name}")
    if spec.sysctls:
        netns.write_sysctls(spec.sysctls)
    if spec.nat is not None:
        out = resolve_iface(node, spec.nat.out)
        assert out is not None
        rules = nat_ruleset(out)
        check_done(subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True,
                              check=False), f"{what}: NAT")


def nat_ruleset(out_if: str) -> str:
    tables = []
    for fam in ("ip", "ip6"):
        tables.append(f"table {fam} hoplab_nat {{\n"
                      "  chain postrouting {\n"
                      "    type nat hook postrouting priority srcnat; policy accept;\n"
                      f'    oifname "{out_if}" masquerade\n'
                      "  }\n"
                      "}\n")
    return "".join(tables)


def resolve_iface(node: NodePlan, ref: str) -> str | None:
    """An interface reference is an interface name or a neighbour node's name."""
    for i in node.ifaces:
        if i.name == ref:
            return i.name
    for i in node.ifaces:
        if i.kind == "veth" and i.peer == ref:
            return i.name
    return None


def validate(plan: Plan) -> None:
    """Checks that need the plan; all before anything is built."""
    for node in plan.nodes:
        spec = plan.lab.node(node.name)
        if spec.nat is not None and resolve_iface(node, spec.nat.out) is None:
            names = ", ".join(i.name for i in node.ifaces) or "none"
            raise UsageError(f"{plan.lab.source}: nodes.{node.name}.nat.out: "
                             f"{spec.nat.out!r} is neither an interface of {node.name} "
                             f"({names}) nor a neighbour")


def preflight(lab: Lab, caps: Capabilities | None = None) -> Plan | None:
    """What this machine must have, then the plan; None for a lab whose devices'
    addresses are read at lab up (it is planned then)."""
    caps = caps or probe()
    problems = requirements_problems(lab, caps)
    if problems:
        raise CapabilityError(f"{lab.source}: this machine cannot build lab {lab.name!r}:\n  "
                              + "\n  ".join(problems))
    if unresolved(lab):
        return None
    plan = plan_lab(lab)
    validate(plan)
    return plan


def up(lab: Lab, *, caps: Capabilities | None = None, progress: Progress | None = None,
       tools: Mapping[str, Collection[str]] | None = None,
       why: Mapping[str, str] | None = None) -> UpResult:
    """Build `lab`. `tools`: what the tests will run on each device, checked there
    before anything is touched (`why`, by "node:tool", says which test needs it)."""
    from hoplab.nodes.registry import executor_for

    t0 = time.monotonic()
    caps = caps or probe()
    devices.check_nics(lab)
    # Reaching, reading and checking every device touches nothing on it.
    execs = devices.connect(lab, executor_for)
    written = lab
    try:
        if execs:
            views = dict(zip(execs, _in_parallel(devices.view, list(execs.values())),
                             strict=True))
            lab = devices.resolve(lab, views)
            needs = devices.tools_needed(lab)
            for node, wanted in (tools or {}).items():
                needs.setdefault(node, set()).update(wanted)
            devices.check_tools(lab, execs, needs, why)
        # One build of a name at a time: its checks that nothing of the lab exists, and a
        # failed build's teardown of what its record lists, see no other build's.
        with lab_lock(lab.name):
            return _up(lab, caps, progress, execs, t0, written)
    finally:
        devices.close(execs.values())


def _in_parallel(job: Callable[[Executor], devices.DeviceView],
                   items: list[Executor]) -> list[devices.DeviceView]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(items)))) as pool:
        return list(pool.map(job, items))


def _up(lab: Lab, caps: Capabilities, progress: Progress | None,
        execs: Mapping[str, Executor], t0: float, written: Lab) -> UpResult:
    plan = preflight(lab, caps)
    assert plan is not None  # device addresses are resolved by now
    local = [n for n in plan.nodes if not lab.node(n.name).is_device]
    old = find(lab.name)
    if old is not None and (any(netns.exists(n) for n in old.namespaces) or old.devices):
        raise UsageError(f"lab {lab.name!r} is already up; take it down first: "
                         f"hoplab lab down {lab.name}")
    taken = [n.netns for n in local if netns.exists(n.netns)]
    if taken:
        raise UsageError(f"namespace {taken[0]} already exists; run hoplab clean")
    src = Path(lab.source)
    state = LabState(name=lab.name, source=str(src.resolve()) if src.exists() else lab.source,
                     namespaces=[n.netns for n in local])
    wires = {w.index: w for w in wire.plan_wires(
        lab.name, [lk for lk in lab.links if impairment_backend(lk, caps) == "wire"],
        state.rundir)}
    state.namespaces += [w.netns for w in wires.values()]
    # Which node is where, before anything exists: a process started on a device during
    # the build is stopped there by clean after a crash. No teardown commands yet: they
    # are for a lab whose setup ran (the final summary has them).
    state.summary = summarize(plan)
    for info in state.summary["nodes"].values():
        info["teardown"] = []
    state.save()
    devices.record_devices(state, lab)
    result = UpResult(state, plan, 0.0)
    say = progress or (lambda _msg: None)

    def step(name: str, start: float) -> float:
        now = time.monotonic()
        result.steps[name] = now - start
        return now

    # After the first signal the others are ignored: the teardown below must finish.
    with terminate_as_interrupt(shield_after_first=True):
        try:
            t = time.monotonic()
            say("namespaces")
            netns.ip_batch([f"netns add {n}" for n in state.namespaces], "creating namespaces")
            moves = devices.attach_nics(state, plan)
            netns.ip_batch([f"link set {nic} netns {ns}" for nic, ns in moves],
                           "attaching host NICs")
            by_ns = {n.netns: n for n in local}
            netns.in_each(list(by_ns), lambda ns: netns.write_sysctls(
                _base_sysctls(by_ns[ns], plan.diameter)))
            wire_ns = [w.netns for w in wires.values()]
            netns.in_each(wire_ns, lambda _ns: netns.write_sysctls(wire.SYSCTLS))
            t = step("namespaces", t)
            say("links")
            netns.ip_batch(_veth_lines(plan, wires), "creating links")
            wired = frozenset(wires)
            netns.in_each(list(by_ns), lambda ns: _configure_veths(lab, by_ns[ns], wired))
            t = step("links", t)
            if wires:
                say("wires")
                _start_wires(list(wires.values()), state)
                t = step("wires", t)
            if plan.wireguard:
                say("wireguard")
                _start_wireguard(plan, state, caps)
                wg_nodes = [n.netns for n in plan.nodes
                            if any(i.kind.startswith("wg") for i in n.ifaces)]
                netns.in_each(wg_nodes, lambda ns: netns.ip_batch(
                    _ip_lines(by_ns[ns], ("wg-hop", "wg-tunnel")), f"node {by_ns[ns].name}"))
                _warm_tunnels(plan)
                t = step("wireguard", t)
            _write_hosts(plan, state)
            _run_commands(plan, "setup")
            t = step("hosts+setup", t)
            if execs:
                say("devices")
                devices.apply(state, plan, execs)
                # Addresses the setup commands made are there now, on named interfaces.
                views = dict(zip(execs, _in_parallel(devices.view, list(execs.values())),
                                 strict=True))
                result.plan = plan_lab(devices.resolve(written, views, after_setup=True))
                _check_cables(result.plan)
                t = step("devices", t)
            state.status = "up"
            state.summary = summarize(result.plan)
            state.summary["wires"] = [
                {"link": w.index, "label": w.label, "netns": w.netns, "name": w.short,
                 "stats": str(w.stats)} for w in wires.values()]
            for row, lk in zip(state.summary["links"], lab.links, strict=True):
                # Which emulator and which discipline each direction got, for lab status.
                row.update(link_disciplines(lk, caps))
            state.save()
        except BaseException:
            with shielded():
                teardown(state, run_hooks=False)
            raise
    result.seconds = time.monotonic() - t0
    return result


def _start_wires(wires: list[wire.WireLink], state: LabState) -> None:
    exe = wire.binary()
    if exe is None:
        raise CapabilityError(f"{wire.BINARY} is not built; run make setup")
    netns.in_each([w.netns for w in wires],
                  lambda _ns: netns.ip_batch(wire.IP_LINES, f"wire namespace {_ns}"))
    started = []
    for w in wires:
        proc = wire.start(w, exe)
        # Recorded at once, so an interrupt from here on still stops it.
        state.add_process(proc.pid, w.argv(exe), w.short, f"{wire.BINARY} for {w.label}")
        started.append((w, proc))
    deadline = time.monotonic() + wire.START_TIMEOUT_S
    for w, proc in started:
        wire.wait_ready(w, proc, deadline)


def _start_wireguard(plan: Plan, state: LabState, caps: Capabilities) -> None:
    mode = caps.wireguard_mode()
    if mode is None:
        raise CapabilityError("WireGuard needs the kernel module or wireguard-go over TUN")
    keys = {(e.node, e.ifname): wireguard.generate_keypair() for e in plan.wireguard}
    ifaces = []
    for e in plan.wireguard:
        peer_key = keys[(e.peer, e.peer_ifname)]
        ifaces.append(wireguard.WgInterface(
            netns=plan.node(e.node).netns, ifname=e.ifname, keys=keys[(e.node, e.ifname)],
            listen_port=e.listen_port,
            peers=(wireguard.WgPeer(peer_key.public_hex, e.endpoint, e.allowed, None),),
            rundir=state.rundir / "wg" / e.node))

    def record(iface: wireguard.WgInterface, pid: int) -> None:
        node = iface.netns.removeprefix(netns_prefix(plan.lab.name))
        state.add_process(pid, ["wireguard-go", "-f", iface.ifname], node,
                          f"wireguard-go {iface.ifname}")

    wireguard.start_many(ifaces, mode, on_started=record)


def _udp_ports() -> set[int]:
    """Bound UDP ports of the namespace this thread is in."""
    ports = set()
    for table in ("udp", "udp6"):
        try:
            lines = Path(f"/proc/thread-self/net/{table}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            ports.add(int(line.split()[1].rsplit(":", 1)[1], 16))
    return ports


def _wait_listening(jobs: dict[str, set[int]], ns: str) -> None:
    deadline = time.monotonic() + 5.0
    while not jobs[ns] <= _udp_ports():
        if time.monotonic() > deadline:
            missing = sorted(jobs[ns] - _udp_ports())
            raise LabError(f"WireGuard in {ns} is not listening on UDP {missing}")
        time.sleep(0.01)


def _warm_tunnels(plan: Plan) -> None:
    """Complete every handshake now, hops before end-to-end tunnels (which ride on
    them), so the first packets of a measurement never wait for one."""
    # wireguard-go binds its UDP socket only when it sees the link-up event; a
    # handshake sent to a peer that has not yet bound is lost for 5 s.
    ports: dict[str, set[int]] = {}
    for e in plan.wireguard:
        ports.setdefault(plan.node(e.node).netns, set()).add(e.listen_port)
    netns.in_each(list(ports), partial(_wait_listening, ports))
    for kind in ("wg-hop", "wg-tunnel"):
        jobs: dict[str, list[str]] = {}
        for node in plan.nodes:
            for i in node.ifaces:
                if i.kind == kind and node.name < i.peer:
                    peer = plan.node(i.peer)
                    far = next(x for x in peer.ifaces if x.kind == kind and x.peer == node.name
                               and x.link == i.link and x.tunnel == i.tunnel)
                    jobs.setdefault(node.netns, []).append(str(far.addrs[0].ip))
        netns.in_each(list(jobs), partial(_ping_from, jobs))


def _ping_from(jobs: dict[str, list[str]], ns: str) -> None:
    for addr in jobs[ns]:
        # A lost first handshake is retried by WireGuard after 5 s: allow one.
        proc = subprocess.run(["ping", "-c1", "-W7", "-q", addr], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            raise LabError(f"WireGuard tunnel from {ns} to {addr} does not carry traffic")


def _check_cables(plan: Plan) -> None:
    """Each namespace cabled to a device reaches the device's address on the cable."""
    jobs: dict[str, list[str]] = {}
    for node in plan.nodes:
        for i in node.ifaces:
            if i.kind == "nic":
                far = next(x for x in plan.node(i.peer).ifaces if x.link == i.link)
                jobs.setdefault(node.netns, []).extend(str(a.ip) for a in far.addrs)
    def ping(ns: str) -> None:
        for addr in jobs[ns]:
            got = subprocess.run(["ping", "-c1", "-W3", "-q", addr], capture_output=True,
                                 text=True, check=False)
            if got.returncode != 0:
                node = ns.removeprefix(netns_prefix(plan.lab.name))
                raise LabError(f"node {node} does not reach {addr} over its cable: is the "
                               f"NIC cabled to the device, and the device's port up?")
    netns.in_each(list(jobs), ping)


def _write_hosts(plan: Plan, state: LabState) -> None:
    state.rundir.mkdir(parents=True, exist_ok=True)
    hosts = state.rundir / "hosts"
    hosts.write_text(hosts_file(plan))
    for node in plan.nodes:
        if plan.lab.node(node.name).is_device:
            continue
        d = ETC_NETNS / node.netns
        d.mkdir(parents=True, exist_ok=True)
        link = d / "hosts"
        if link.is_symlink() or link.exists():
            link.unlink()
        # `ip netns exec` bind-mounts this over /etc/hosts; the bind follows the link.
        link.symlink_to(hosts)


def _run_commands(plan: Plan, which: str) -> None:
    cwd = Path(plan.lab.source).parent if plan.lab.source.endswith(".toml") else None
    for node in plan.nodes:
        spec = plan.lab.node(node.name)
        if spec.is_device:
            continue  # a device's commands run over SSH (hoplab.lab.devices)
        cmds = spec.setup if which == "setup" else spec.teardown
        for argv in cmds:
            env = dict(os.environ, HOPLAB_LAB=plan.lab.name, HOPLAB_NODE=node.name)
            with netns.entered(node.netns):
                try:
                    proc = subprocess.run(list(argv), capture_output=True, text=True,
                                          check=False, cwd=cwd, env=env, timeout=300)
                except FileNotFoundError:
                    raise LabError(f"node {node.name}: {which} command not found: "
                                   f"{argv[0]}") from None
            check_done(proc, f"node {node.name}: {which} {' '.join(argv)}")


def down(name: str) -> list[str]:
    with lab_lock(name):
        state = find(name)
        if state is None:
            raise UsageError(f"no lab named {name!r} is up (see hoplab lab status)")
        return teardown(state)


def check_devices(lab: Lab, tools: Mapping[str, Collection[str]] | None = None,
                  why: Mapping[str, str] | None = None) -> None:
    """Everything lab up checks about a lab's NICs and devices, touching nothing: for an
    experiment to refuse (exit 2) before its first run rather than fail every run."""
    from hoplab.nodes.registry import executor_for

    if not lab.devices() and not any(lk.attach for lk in lab.links):
        return
    devices.check_nics(lab)
    execs = devices.connect(lab, executor_for)
    try:
        views = dict(zip(execs, _in_parallel(devices.view, list(execs.values())), strict=True))
        resolved = devices.resolve(lab, views)
        needs = devices.tools_needed(resolved)
        for node, wanted in (tools or {}).items():
            needs.setdefault(node, set()).update(wanted)
        devices.check_tools(resolved, execs, needs, why)
    finally:
        devices.close(execs.values())


def hand_over(lab: Lab) -> Lab | None:
    """The lab `hoplab lab up` built from the same file, if it is up: an experiment's runs
    need its host NICs and devices, so it is taken down now and returned, to be built
    again by take_back() when the runs end. A lab another process is using is refused."""
    from hoplab.lab.clean import in_use

    state = find(lab.name)
    if state is None or state.status != "up" or not Path(lab.source).exists() \
            or Path(state.source) != Path(lab.source).resolve():
        return None
    if in_use(state):
        raise UsageError(f"lab {lab.name!r} is up and in use by pid {state.owner_pid}; its "
                         f"NICs and devices are busy until it ends")
    for warning in down(lab.name):
        raise LabError(f"lab {lab.name!r} could not be taken down for the runs: {warning}")
    return lab


def take_back(lab: Lab) -> list[str]:
    """Build again the lab hand_over() took down; a failure is a warning (the runs are
    stored), with the command that builds it."""
    from hoplab.spec import load_lab

    try:
        up(load_lab(lab.source, name=lab.name))
    except Exception as exc:  # the runs are stored already; say how to rebuild it
        return [f"lab {lab.name} could not be brought back up ({exc}); "
                f"hoplab lab up {lab.source}"]
    return []
