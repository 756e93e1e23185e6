"""Bring a planned lab up in network namespaces, and take it down again.

Order matters for speed and for safety: the state record is written before
anything exists; namespaces are created in one `ip -batch`; sysctls that
new interfaces inherit (no IPv6 DAD) are set before the veths arrive in a
second root `ip -batch`; then each namespace is configured by one `ip -batch`
and one `tc -batch`, each through the namespace's executor (hoplab.nodes.registry)
from a pool of threads (hoplab.lab.netns).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from hoplab.errors import CapabilityError, LabError, UsageError
from hoplab.held_stops import stops_held
from hoplab.lab import netns, wire, wireguard
from hoplab.lab.caps import Capabilities, probe
from hoplab.lab.clean import in_use
from hoplab.lab.devices import addresses, labgrid, nics, reach, settings, survey
from hoplab.lab.lock import lab_lock
from hoplab.lab.plan import Iface, NodePlan, Plan, hosts_file, plan_lab, unresolved
from hoplab.lab.requirements import (
    for_host,
    guest_ends,
    impairment_backend,
    link_disciplines,
    requirements_problems,
)
from hoplab.lab.shaping import tc_lines
from hoplab.lab.signals import shielded, terminate_as_interrupt
from hoplab.lab.state import ETC_NETNS, LabState, find
from hoplab.lab.summary import summarize
from hoplab.lab.teardown import teardown
from hoplab.lab.vm import boot as vm_boot
from hoplab.lab.vm import firmware, guest, qemu, wg
from hoplab.lab.vm.script import Step, failed, script
from hoplab.lab.where import netns_prefix
from hoplab.nodes.each import in_each
from hoplab.nodes.executor import Completed, Executor
from hoplab.nodes.netns import exists as ns_exists
from hoplab.nodes.registry import executor_for, in_namespace
from hoplab.spec import load_lab
from hoplab.spec.model import Lab

if TYPE_CHECKING:
    from hoplab.nodes.netns_exec import NetnsExecutor

Progress = Callable[[str], None]


@dataclass
class UpResult:
    state: LabState
    plan: Plan
    seconds: float
    steps: dict[str, float] = field(default_factory=dict)
    # What the user should know of how the lab came up (a VM booted again).
    warnings: list[str] = field(default_factory=list)


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
        if i.kind in ("veth", "nic", "tap", "guest"):
            lines.append(f"link set {i.name} up")
        for a in i.addrs:
            flag = " nodad" if a.version == 6 else ""
            lines.append(f"addr add {a.with_prefixlen} dev {i.name}{flag}")
    for r in node.routes:
        if r.dev in devs:
            lines.append(f"route add {r.dst} via {r.gateway} dev {r.dev} proto static")
    return lines


def _configure_veths(lab: Lab, node: NodePlan, ex: NetnsExecutor,
                     wired: frozenset[int] = frozenset()) -> None:
    what = f"node {node.name}"
    netns.ip_batch(_ip_lines(node, ("veth", "nic", "tap")), what, ex)
    tc: list[str] = []
    for i in node.ifaces:
        if i.kind in ("veth", "tap") and i.link not in wired:
            tc += tc_lines(i.name, i.egress)
    netns.tc_batch(tc, what, ex)
    for i in node.ifaces:
        if i.kind == "veth" and i.link in wired and wire.per_packet(i.egress):
            # Loss, duplication and jitter act per packet: the wire must see
            # packets, not the 64 KiB GSO super-frames this sender would hand it.
            _check(ex.run(["ethtool", "-K", i.name, "tso", "off", "gso", "off"]),
                   f"{what}: offloads off on {i.name} (wired link)")
    spec = lab.node(node.name)
    if spec.offloads:
        for i in node.ifaces:
            if i.kind not in ("veth", "tap"):
                continue
            argv = ["ethtool", "-K", i.name]
            for feat, on in spec.offloads:
                argv += [feat, "on" if on else "off"]
            _check(ex.run(argv), f"{what}: offloads on {i.name}")
    if spec.sysctls:
        netns.write_sysctls(ex, spec.sysctls)
    if spec.nat is not None:
        out = resolve_iface(node, spec.nat.out)
        assert out is not None
        _check(ex.run(["nft", "-f", "-"], input=nat_ruleset(out)), f"{what}: NAT")


def _check(done: Completed, what: str) -> None:
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise LabError(f"{what}: exit {done.returncode}: {' '.join(tail)}")


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
        if i.kind in ("veth", "tap", "guest") and i.peer == ref:
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
    t0 = time.monotonic()
    caps = caps or probe()
    nics.check_nics(lab)
    # One build of a name at a time: its checks that nothing of the lab exists, and a
    # failed build's teardown of what its record lists, see no other build's.
    with lab_lock(lab.name):
        if not labgrid.named(lab):
            return _reach_and_build(lab, caps, progress, tools, why, t0, None)
        # Devices named by labgrid places: the places are held (and recorded) first, for
        # their addresses; what is held is given back if the build never records it.
        held = _first_record(lab)
        with terminate_as_interrupt(shield_after_first=True):
            try:
                reached = labgrid.hold(lab, held)
                return _reach_and_build(reached, caps, progress, tools, why, t0, held)
            except BaseException:
                # A build that recorded the lab took it down (and its record) itself.
                if held.path.exists():
                    with shielded():
                        teardown(held, run_hooks=False)
                raise


def _reach_and_build(lab: Lab, caps: Capabilities, progress: Progress | None,
                     tools: Mapping[str, Collection[str]] | None,
                     why: Mapping[str, str] | None, t0: float,
                     held: LabState | None) -> UpResult:
    # Reaching, reading and checking every device touches nothing on it.
    execs = reach.connect(lab, executor_for)
    try:
        resolved = survey.read_devices(lab, execs, tools, why) if execs else lab
        return _up(resolved, caps, progress, execs, t0, lab, held)
    finally:
        reach.close(execs.values())


def _first_record(lab: Lab) -> LabState:
    """The record of a lab whose labgrid places are about to be held: nothing else yet."""
    _not_up(lab)
    src = Path(lab.source)
    state = LabState(name=lab.name, source=str(src.resolve()) if src.exists() else lab.source)
    state.save()
    return state


def _not_up(lab: Lab) -> None:
    old = find(lab.name)
    if old is not None and (any(ns_exists(n) for n in old.namespaces) or old.devices
                            or old.labgrid):
        raise UsageError(f"lab {lab.name!r} is already up; take it down first: "
                         f"hoplab lab down {lab.name}")


@dataclass
class _Build:
    """A lab being built: what is made where, and the record of it."""
    lab: Lab
    plan: Plan
    caps: Capabilities
    state: LabState
    result: UpResult
    say: Progress
    # The executor of each node that is a namespace here, by namespace.
    local: dict[str, NetnsExecutor]
    wires: dict[int, wire.WireLink]
    vms: dict[str, vm_boot.Vm] = field(default_factory=dict)
    wg_keys: dict[tuple[str, str], wireguard.KeyPair] = field(default_factory=dict)

    def step(self, name: str, start: float) -> float:
        now = time.monotonic()
        self.result.steps[name] = now - start
        return now

    def node(self, ex: NetnsExecutor) -> NodePlan:
        return self.plan.node(ex.node)


def _up(lab: Lab, caps: Capabilities, progress: Progress | None,
        execs: Mapping[str, Executor], t0: float, written: Lab,
        held: LabState | None) -> UpResult:
    plan = preflight(lab, caps)
    assert plan is not None  # device addresses are resolved by now
    b = _record(lab, plan, caps, progress, held)
    # After the first signal the others are ignored: the teardown below must finish.
    with terminate_as_interrupt(shield_after_first=True):
        try:
            t = _make_namespaces(b, time.monotonic())
            if b.vms:
                # Booting takes seconds: the namespaces are configured meanwhile.
                b.say("vms")
                vm_boot.start(lab, plan, b.state, b.vms, _boot_configs(b))
            t = _make_links(b, t)
            _write_hosts(plan, b.state)
            _run_commands(plan, b.local)
            t = b.step("hosts+setup", t)
            if b.vms:
                b.result.warnings += vm_boot.wait_ready(b.vms, b.state)
                _configure_guests(b)
                if b.plan.wireguard:
                    _guest_wireguard(b)
                vm_boot.limit_cpu(b.vms)
                t = b.step("vms", t)
            if execs:
                b.say("devices")
                settings.apply(b.state, plan, execs)
                # Addresses the setup commands made are there now, on named interfaces.
                b.result.plan = plan_lab(addresses.resolve(
                    written, survey.views(execs), after_setup=True))
                _check_cables(b.result.plan, b.local)
                t = b.step("devices", t)
            _finish(b)
        except BaseException:
            with shielded():
                vm_boot.close_nics(b.vms)
                teardown(b.state, run_hooks=False)
            raise
    b.result.seconds = time.monotonic() - t0
    return b.result


def _record(lab: Lab, plan: Plan, caps: Capabilities, progress: Progress | None,
            held: LabState | None = None) -> _Build:
    """Check nothing of the lab is here yet, and write down what will be, before anything
    exists: the state record, with which node is where (a process started on a device
    during the build is stopped there by clean after a crash). `held`: the record of
    the labgrid places held for it, which this one carries on."""
    local = [n for n in plan.nodes if lab.node(n.name).node_kind.local]
    if held is None:
        _not_up(lab)
    taken = [n.netns for n in local if ns_exists(n.netns)]
    if taken:
        raise UsageError(f"namespace {taken[0]} already exists; run hoplab clean")
    src = Path(lab.source)
    state = LabState(name=lab.name, source=str(src.resolve()) if src.exists() else lab.source,
                     namespaces=[n.netns for n in local])
    if held is not None:
        state.created, state.labgrid = held.created, held.labgrid
    wires = {w.index: w for w in wire.plan_wires(
        lab.name, [lk for lk in lab.links
                   if impairment_backend(for_host(lab, lk), caps) == "wire"],
        state.rundir)}
    state.namespaces += [w.netns for w in wires.values()]
    # No teardown commands yet: they are for a lab whose setup ran (the final summary
    # has them).
    state.summary = summarize(plan)
    for info in state.summary["nodes"].values():
        info["teardown"] = []
    # A VM's SSH port and keys are in its entry before it boots (fetching its kernel
    # the first time), so a teardown after a crash reaches it.
    vms = vm_boot.prepare(lab, plan, state)
    state.save()
    settings.record_devices(state, lab)
    return _Build(lab, plan, caps, state, UpResult(state, plan, 0.0),
                  progress or (lambda _msg: None),
                  {n.netns: in_namespace(n.name, n.netns) for n in local}, wires, vms)


def _make_namespaces(b: _Build, t: float) -> float:
    b.say("namespaces")
    netns.ip_batch([f"netns add {n}" for n in b.state.namespaces], "creating namespaces")
    moves = nics.attach_nics(b.state, b.plan)
    netns.ip_batch([f"link set {nic} netns {ns}" for nic, ns in moves], "attaching host NICs")
    diameter = b.plan.diameter
    in_each(list(b.local.values()), lambda ex: netns.write_sysctls(
        ex, _base_sysctls(b.node(ex), diameter)))
    wires = [in_namespace(w.short, w.netns) for w in b.wires.values()]
    in_each(wires, lambda ex: netns.write_sysctls(ex, wire.SYSCTLS))
    return b.step("namespaces", t)


def _make_links(b: _Build, t: float) -> float:
    b.say("links")
    netns.ip_batch(_veth_lines(b.plan, b.wires), "creating links")
    wired = frozenset(b.wires)
    in_each(list(b.local.values()),
            lambda ex: _configure_veths(b.lab, b.node(ex), ex, wired))
    t = b.step("links", t)
    if b.wires:
        b.say("wires")
        _start_wires(list(b.wires.values()), b.state)
        t = b.step("wires", t)
    if b.plan.wireguard:
        b.say("wireguard")
        b.wg_keys = {(e.node, e.ifname): wireguard.generate_keypair()
                     for e in b.plan.wireguard}
        _start_wireguard(b.plan, b.state, b.caps, b.wg_keys, frozenset(b.vms))
        wg_nodes = [b.local[n.netns] for n in b.plan.nodes
                    if n.netns in b.local and any(i.kind.startswith("wg") for i in n.ifaces)]
        in_each(wg_nodes, lambda ex: netns.ip_batch(
            _ip_lines(b.node(ex), ("wg-hop", "wg-tunnel")), f"node {ex.node}", ex))
        if not b.vms:
            _warm_tunnels(b.plan, b.local)    # else once the VMs' ends are up too
        t = b.step("wireguard", t)
    return t


def _guest_wireguard(b: _Build) -> None:
    """The VMs' WireGuard ends (their own kernels' module), then every tunnel warmed."""
    execs: dict[str, Executor] = dict(b.local)
    for name in b.vms:
        execs[b.plan.node(name).netns] = executor_for(name, b.state.summary["nodes"][name])

    def ends_of(name: str) -> None:
        ex = execs[b.plan.node(name).netns]
        for e in b.plan.wireguard:
            if e.node == name:
                wg.start(ex, e, b.wg_keys[(e.node, e.ifname)],
                         b.wg_keys[(e.peer, e.peer_ifname)])
                netns.ip_batch(_ip_lines(b.plan.node(e.node), ("wg-hop", "wg-tunnel")),
                               f"VM {e.node}", ex)

    try:
        # Each VM at once (its ends one after the other): SSH round trips to guests,
        # 2.5 s an end in a 50 %-CPU guest under TCG (examples/vm/relay.toml).
        in_each([n for n in b.vms if any(e.node == n for e in b.plan.wireguard)], ends_of)
        _warm_tunnels(b.plan, execs)
    finally:
        for name in b.vms:
            execs[b.plan.node(name).netns].close()


def _finish(b: _Build) -> None:
    """The lab is up: its record says what it is, for lab status and lab down."""
    state = b.state
    state.status = "up"
    vms = {n: state.summary["nodes"][n] for n in b.vms}
    state.summary = summarize(b.result.plan)
    for name, entry in vms.items():
        state.summary["nodes"][name].update(
            netns=None, kind=entry["kind"], ssh=entry["ssh"], vm=entry["vm"],
            teardown=[list(c) for c in b.lab.node(name).teardown])
    state.summary["wires"] = [
        {"link": w.index, "label": w.label, "netns": w.netns, "name": w.short,
         "stats": str(w.stats)} for w in b.wires.values()]
    for row, lk in zip(state.summary["links"], b.lab.links, strict=True):
        # Which emulator and which discipline each direction got, for lab status.
        row.update(link_disciplines(for_host(b.lab, lk), b.caps))
        if guest_ends(b.lab, lk):
            row["emulator"] = ("guest tc" if row["emulator"] in ("none", "tc", "netem")
                               else row["emulator"])
    state.save()


def _guest_steps(b: _Build, name: str, hosts: str) -> tuple[list[Step], dict[int, list[str]]]:
    """A VM's configuration as script steps (its setup commands not among them), and
    which of them are iproute2 batches (by index: their errors name the line). A
    firmware's: its NICs found by MAC first, and one command per line, as BusyBox takes
    them (vm/firmware.py)."""
    node, spec = b.plan.node(name), b.lab.node(name)
    sysctls = [*_base_sysctls(node, b.plan.diameter), *spec.sysctls]
    ip = _ip_lines(node, ("guest",))
    tc = [line for i in node.ifaces if i.kind == "guest"
          for line in tc_lines(i.name, i.egress)]
    nics = b.vms[name].boot.nics
    firm = b.vms[name].boot.firmware is not None
    steps = firmware.rename([(n.mac, n.name) for n in nics]) if firm else []
    steps += [Step("sysctls", ["sysctl", "-qw", *(f"{k}={v}" for k, v in sysctls)]),
              Step("hosts", ["sh", "-c", "cat > /etc/hosts"], hosts)]
    if firm and any(a.version == 6 for i in node.ifaces for a in i.addrs):
        steps.append(firmware.accept_dad_off([n.name for n in nics]))
    batches: dict[int, list[str]] = {}
    for tool, lines, label in (("ip", ip, "ip"), ("tc", tc, "its own kernel's tc")):
        if lines and firm:
            steps += [firmware.need(tool, label), *firmware.lines(tool, lines, label)]
        elif lines:
            batches[len(steps)] = lines
            steps.append(Step(label, [tool, "-batch", "-"], "\n".join(lines)))
    for i in node.ifaces:
        if i.kind == "guest" and spec.offloads:
            argv = ["ethtool", "-K", i.name]
            for feat, on in spec.offloads:
                argv += [feat, "on" if on else "off"]
            steps.append(Step(f"offloads on {i.name}", argv))
    if spec.nat is not None:
        out = resolve_iface(node, spec.nat.out)
        assert out is not None
        steps.append(Step("NAT", ["nft", "-f", "-"], nat_ruleset(out)))
    return steps, batches


def _boot_configs(b: _Build) -> dict[str, str]:
    """The configuration script of each VM that boots a kernel hoplab gives it: its
    stage2 runs it before its SSH server starts (vm/guest.py). A firmware's is run over
    SSH once it is up."""
    hosts = hosts_file(b.plan)
    return {name: script(_guest_steps(b, name, hosts)[0]) for name, vm in b.vms.items()
            if vm.boot.firmware is None}


def _configure_guests(b: _Build) -> None:
    """Each VM as a namespace is configured: sysctls, its NICs' addresses and routes,
    its own kernel's tc on each NIC, offloads, NAT and /etc/hosts, by its stage2 as it
    boots (_boot_configs; its exit status read from its console), or over SSH for a
    firmware; then its setup commands over SSH. One script, one SSH call at most
    (vm/script.py)."""
    hosts = hosts_file(b.plan)

    def one(name: str) -> None:
        vm, spec = b.vms[name], b.lab.node(name)
        steps: list[Step] = []
        batches: dict[int, list[str]] = {}
        if vm.boot.firmware is not None:
            steps, batches = _guest_steps(b, name, hosts)
        elif (rc := _boot_config_status(b, name)) != 0:
            booted, batches = _guest_steps(b, name, hosts)
            err = _run_guest(b, name, [Step("its error", ["cat", guest.CONFIG_ERR])]).stdout
            _guest_failed(name, booted, batches, Completed((), rc, "", err))
        env = (("HOPLAB_LAB", b.lab.name), ("HOPLAB_NODE", name))
        steps += [Step(f"setup {' '.join(cmd)}", cmd, env=env) for cmd in spec.setup]
        if vm.boot.firmware is not None:
            steps.append(firmware.RELEASE)
        if not steps:
            return
        done = _run_guest(b, name, steps)
        if done.returncode != 0:
            _guest_failed(name, steps, batches, done)
        if vm.boot.firmware is not None:
            # The firmware's kernel, for lab status and the run's metadata.
            b.state.summary["nodes"][name]["vm"]["release"] = \
                (done.stdout.strip().splitlines() or ["?"])[-1]

    in_each(list(b.vms), one)


def _boot_config_status(b: _Build, name: str) -> int:
    """The exit status of the configuration a VM ran as it booted: from its console, or
    where the console's line was lost among the kernel's (never seen), from the guest."""
    rc = guest.configured(b.vms[name].boot.dir / qemu.SERIAL_LOG)
    if rc is None:
        text = _run_guest(b, name, [Step("its status", ["cat", guest.CONFIG_RC])]).stdout
        rc = int(text.strip()) if text.strip().isdigit() else 1
    return rc


def _run_guest(b: _Build, name: str, steps: list[Step]) -> Completed:
    """`steps` as one script over one SSH call, on an executor of its own."""
    ex = executor_for(name, b.state.summary["nodes"][name])
    ex.ignore_reboots()
    try:
        return ex.run(["sh", "-c", script(steps)],
                      timeout=60 + 300 * len(b.lab.node(name).setup))
    finally:
        ex.close()


def _guest_failed(name: str, steps: list[Step], batches: dict[int, list[str]],
                  done: Completed) -> None:
    """The error of a VM's configuring script: the step that failed and its messages
    (the line, for an iproute2 batch)."""
    what = f"VM {name}"
    where = failed(done.stderr)
    if where is None:
        _check(done, what)
        return
    n, err = where
    batch = batches.get(n)
    msg = netns.batch_error(err, batch) if batch else " ".join(err.strip().splitlines()[-3:])
    raise LabError(f"{what}: {steps[n].what}: exit {done.returncode}: {msg}")


def _start_wires(wires: list[wire.WireLink], state: LabState) -> None:
    exe = wire.binary()
    if exe is None:
        raise CapabilityError(f"{wire.BINARY} is not built; run make setup")
    in_each([in_namespace(w.short, w.netns) for w in wires],
            lambda ex: netns.ip_batch(wire.IP_LINES, f"wire namespace {ex.netns}", ex))
    started = []
    for w in wires:
        # Started and recorded as one: a stop that lands in between is delivered once
        # the record has it, and the teardown stops it.
        with stops_held():
            proc = wire.start(w, exe)
            state.add_process(proc.pid, w.argv(exe), w.short, f"{wire.BINARY} for {w.label}")
        started.append((w, proc))
    deadline = time.monotonic() + wire.START_TIMEOUT_S
    for w, proc in started:
        wire.wait_ready(w, proc, deadline)


def _start_wireguard(plan: Plan, state: LabState, caps: Capabilities,
                     keys: Mapping[tuple[str, str], wireguard.KeyPair],
                     guests: frozenset[str] = frozenset()) -> None:
    """The namespaces' WireGuard ends (a VM's are its own kernel's: _guest_wireguard)."""
    mode = caps.wireguard_mode()
    if mode is None:
        raise CapabilityError("WireGuard needs the kernel module or wireguard-go over TUN")
    ifaces = []
    for e in plan.wireguard:
        if e.node in guests:
            continue
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


def _udp_ports(ex: Executor) -> set[int]:
    """Bound UDP ports of ex's namespace."""
    ports = set()
    for table in ("udp", "udp6"):
        text = ex.read_file(f"/proc/thread-self/net/{table}")
        for line in (text or b"").decode().splitlines()[1:]:
            ports.add(int(line.split()[1].rsplit(":", 1)[1], 16))
    return ports


def wait_listening(jobs: Mapping[str, set[int]], at: tuple[str, Executor]) -> None:
    """Returns once `at`'s executor has every UDP port jobs[where] bound (`at`: where,
    executor), or raises LabError."""
    where, ex = at
    # A VM answers over SSH, slower than a namespace, and boots its module on demand.
    deadline = time.monotonic() + (5.0 if ex.machine == "local" else 30.0)
    want = jobs[where]
    while not want <= _udp_ports(ex):
        if time.monotonic() > deadline:
            missing = sorted(want - _udp_ports(ex))
            raise LabError(f"WireGuard in {where} is not listening on UDP {missing}")
        time.sleep(0.01)


def _warm_tunnels(plan: Plan, local: Mapping[str, Executor]) -> None:
    """Complete every handshake now, hops before end-to-end tunnels (which ride on
    them), so the first packets of a measurement never wait for one."""
    # wireguard-go binds its UDP socket only when it sees the link-up event; a
    # handshake sent to a peer that has not yet bound is lost for 5 s.
    ports: dict[str, set[int]] = {}
    for e in plan.wireguard:
        ports.setdefault(plan.node(e.node).netns, set()).add(e.listen_port)
    in_each([(ns, local[ns]) for ns in ports], partial(wait_listening, ports))
    for kind in ("wg-hop", "wg-tunnel"):
        jobs: dict[str, list[str]] = {}
        for node in plan.nodes:
            for i in node.ifaces:
                if i.kind == kind and node.name < i.peer:
                    peer = plan.node(i.peer)
                    far = next(x for x in peer.ifaces if x.kind == kind and x.peer == node.name
                               and x.link == i.link and x.tunnel == i.tunnel)
                    jobs.setdefault(node.netns, []).append(str(far.addrs[0].ip))
        in_each([(ns, local[ns]) for ns in jobs], partial(_ping_from, jobs))


def _ping_from(jobs: dict[str, list[str]], at: tuple[str, Executor]) -> None:
    where, ex = at
    for addr in jobs[where]:
        # A lost first handshake is retried by WireGuard after 5 s: allow one.
        if ex.run(["ping", "-c1", "-W7", "-q", addr], timeout=30).returncode != 0:
            raise LabError(f"WireGuard tunnel from {where} to {addr} does not carry traffic")


def _check_cables(plan: Plan, local: Mapping[str, NetnsExecutor]) -> None:
    """Each namespace cabled to a device reaches the device's address on the cable."""
    jobs: dict[str, list[str]] = {}
    for node in plan.nodes:
        for i in node.ifaces:
            if i.kind == "nic":
                far = next(x for x in plan.node(i.peer).ifaces if x.link == i.link)
                jobs.setdefault(node.netns, []).extend(str(a.ip) for a in far.addrs)

    def ping(ex: NetnsExecutor) -> None:
        for addr in jobs[ex.netns or ""]:
            if ex.run(["ping", "-c1", "-W3", "-q", addr], timeout=30).returncode != 0:
                raise LabError(f"node {ex.node} does not reach {addr} over its cable: is the "
                               f"NIC cabled to the device, and the device's port up?")
    in_each([local[ns] for ns in jobs], ping)


def _write_hosts(plan: Plan, state: LabState) -> None:
    state.rundir.mkdir(parents=True, exist_ok=True)
    hosts = state.rundir / "hosts"
    hosts.write_text(hosts_file(plan))
    for node in plan.nodes:
        if not plan.lab.node(node.name).node_kind.local:
            continue    # a machine of its own has its own /etc/hosts
        d = ETC_NETNS / node.netns
        d.mkdir(parents=True, exist_ok=True)
        link = d / "hosts"
        if link.is_symlink() or link.exists():
            link.unlink()
        # `ip netns exec` bind-mounts this over /etc/hosts; the bind follows the link.
        link.symlink_to(hosts)


def _run_commands(plan: Plan, local: Mapping[str, NetnsExecutor]) -> None:
    """Each namespace's setup commands, in the lab file's directory; a device's run over
    SSH (hoplab.lab.devices.settings)."""
    cwd = str(Path(plan.lab.source).parent) if plan.lab.source.endswith(".toml") else None
    for node in plan.nodes:
        ex = local.get(node.netns)
        if ex is None:
            continue
        env = {"HOPLAB_LAB": plan.lab.name, "HOPLAB_NODE": node.name}
        for argv in plan.lab.node(node.name).setup:
            done = ex.run(argv, cwd=cwd, env=env, timeout=300)
            if done.returncode == 127 and done.stderr.endswith("command not found"):
                raise LabError(f"node {node.name}: setup command not found: {argv[0]}")
            _check(done, f"node {node.name}: setup {' '.join(argv)}")


def down(name: str) -> list[str]:
    with lab_lock(name):
        state = find(name)
        if state is None:
            raise UsageError(f"no lab named {name!r} is up (see hoplab lab status)")
        return teardown(state)


def hand_over(lab: Lab) -> Lab | None:
    """The lab `hoplab lab up` built from the same file, if it is up: an experiment's runs
    need its host NICs and devices, so it is taken down now and returned, to be built
    again by take_back() when the runs end. A lab another process is using is refused."""
    state = find(lab.name)
    if (state is None or state.status != "up" or not Path(lab.source).exists()
            or Path(state.source) != Path(lab.source).resolve()):
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
    try:
        up(load_lab(lab.source, name=lab.name))
    except Exception as exc:  # the runs are stored already; say how to rebuild it
        return [f"lab {lab.name} could not be brought back up ({exc}); "
                f"hoplab lab up {lab.source}"]
    return []
