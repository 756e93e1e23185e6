"""Devices in a lab: checked before anything is touched, changed only as the file
asks, and put back at lab down (and by `hoplab clean` after a crash).

At `lab up`, before anything is created: each host NIC a link attaches must exist
and carry no addresses in use; each device is reached over SSH (an unreachable or
unauthenticated device is named); its addresses are read and the ones the file
names must be there (an end with no address takes the one SSH reached); every tool
the lab or its tests need must be on it. Then, and only then, the device's
settings are changed, each previous value written to the lab's state record
before the new one is set, so a crash at any point leaves a record that says
exactly what to put back.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from ipaddress import IPv4Interface, IPv6Interface, ip_address, ip_interface
from pathlib import Path
from typing import Any

from hoplab.errors import LabError, SpecError, UsageError
from hoplab.lab.plan import Plan
from hoplab.lab.state import LabState, all_states
from hoplab.nodes.executor import Executor, ExecutorError, Process
from hoplab.spec.loader import key_name
from hoplab.spec.locate import Locator
from hoplab.spec.model import Lab, Link, Node

Iface = IPv4Interface | IPv6Interface
Connect = Callable[[str, Mapping[str, Any]], Executor]

# The package that brings a tool, on OpenWrt (opkg) and on Debian or Ubuntu (apt).
PACKAGES: dict[str, tuple[str, str]] = {
    "iperf3": ("iperf3", "iperf3"),
    "irtt": ("irtt", "irtt"),
    "ping": ("iputils-ping", "iputils-ping"),
    "perf": ("perf, libdw, libelf, libunwind, objdump (a kernel with KERNEL_PERF_EVENTS)",
             "linux-perf"),
    "ethtool": ("ethtool", "ethtool"),
    "tc": ("tc-full (or tc-tiny)", "iproute2"),
    "ip": ("ip-full (or BusyBox's ip)", "iproute2"),
    "nft": ("nftables", "nftables"),
    "iptables": ("iptables-nft", "iptables"),
    "wireguard-go": ("wireguard-tools with kmod-wireguard", "wireguard-go"),
    "wg": ("wireguard-tools", "wireguard-tools"),
    "tee": ("busybox", "coreutils"),
    "nginx": ("nginx-ssl (or nginx-full)", "nginx"),
}

# `ethtool -k` prints features by their long names; `ethtool -K` takes the short ones.
FEATURE_NAMES = {
    "gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload", "lro": "large-receive-offload",
    "sg": "scatter-gather", "rx": "rx-checksumming", "tx": "tx-checksumming",
    "rxvlan": "rx-vlan-offload", "txvlan": "tx-vlan-offload",
    "ntuple": "ntuple-filters", "rxhash": "receive-hashing",
}

SETUP_TIMEOUT_S = 300.0
# Tools whose BusyBox applet is not enough: how to tell, and what the applet lacks.
_KIND_OF_TOOL = {
    "ping": (["ping", "-V"], "iputils", "per-reply timestamps (-D; BusyBox's ping)"),
}
_IFACE_LINE = re.compile(r"^\d+:\s+([^:@\s]+)(?:@\S+)?:")
_ADDR_LINE = re.compile(r"^\s+inet6?\s+(\S+)")


def install_hint(tool: str) -> str:
    openwrt, debian = PACKAGES.get(tool, (tool, tool))
    return f"opkg install {openwrt} (OpenWrt) or apt-get install {debian} (Debian, Ubuntu)"


def spec_error(lab: Lab, path: tuple[str | int, ...], message: str) -> SpecError:
    """A SpecError pointing at `path` in the lab file, as the loader's would."""
    line = None
    try:
        text = Path(lab.source).read_text(encoding="utf-8")
        if path and path[0] == "links" and len(path) > 1 and isinstance(path[1], int):
            # A link's index counts generated links first; the file counts its own.
            written = len(tomllib.loads(text).get("links", []))
            path = ("links", path[1] - (len(lab.links) - written), *path[2:])
        line = Locator(text).line(path)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        pass
    return SpecError(message, file=lab.source, key=key_name(path) or None, line=line)


def ssh_entry(node: Node, lab: Lab) -> dict[str, Any]:
    """A device's entry in the lab's summary and state: what the executor registry
    (hoplab.nodes.registry) needs to reach it again, from a later process too."""
    assert node.ssh is not None
    t = node.ssh
    return {"kind": "ssh", "ssh": {
        "destination": t.destination, "port": t.port, "identity": t.identity,
        "jump": t.jump, "known_hosts": t.known_hosts,
        "accept_new_host_keys": lab.accept_new_host_keys}}


# ---------------------------------------------------------------- host NICs


def _sysfs(nic: str, name: str) -> str | None:
    try:
        return (Path("/sys/class/net") / nic / name).read_text().strip()
    except OSError:
        return None


def check_nics(lab: Lab) -> None:
    """Each attached NIC exists here and is free: down, or up with no address in use."""
    import subprocess

    for link in lab.links:
        for node, nic in link.attach:
            where = ("links", link.index, "attach", node)
            if _sysfs(nic, "ifindex") is None:
                holder = next((st.name for st in all_states()
                               if any(a.get("nic") == nic for a in st.attached)), None)
                if holder is not None:
                    raise spec_error(lab, where, f"{nic} is attached to lab {holder!r}, which "
                                                 f"is up: hoplab lab down {holder}")
                raise spec_error(lab, where, f"no network interface {nic!r} on this machine "
                                             f"(see ip link)")
            flags = int(_sysfs(nic, "flags") or "0", 16)
            if not flags & 1:  # IFF_UP
                continue
            out = subprocess.run(["ip", "-o", "addr", "show", "dev", nic, "scope", "global"],
                                 capture_output=True, text=True, check=False).stdout
            used = [line.split()[3] for line in out.splitlines() if len(line.split()) > 3]
            if used:
                raise spec_error(lab, where, f"{nic} is up with addresses in use "
                                             f"({', '.join(used)}): it would be taken from "
                                             f"this machine; name a free NIC, or free it "
                                             f"(ip addr flush dev {nic})")


def attach_nics(state: LabState, plan: Plan) -> list[tuple[str, str]]:
    """Record, then return the (NIC, namespace) moves to make; the caller moves them."""
    moves = []
    for link in plan.lab.links:
        for node, nic in link.attach:
            ns = plan.node(node).netns
            state.attached.append({"nic": nic, "netns": ns, "node": node,
                                   "up": bool(int(_sysfs(nic, "flags") or "0", 16) & 1),
                                   "mtu": int(_sysfs(nic, "mtu") or "0")})
            moves.append((nic, ns))
    state.save()
    return moves


def give_back_nics(state: LabState) -> list[str]:
    """Return every attached NIC to this machine, as it was (before its namespace goes:
    a veth would die with it). Goes on past a failure; returns warnings."""
    import subprocess

    warnings = []
    for rec in state.attached:
        nic, ns = str(rec["nic"]), str(rec["netns"])
        if Path("/run/netns", ns).exists():
            moved = subprocess.run(["ip", "-n", ns, "-force", "-batch", "-"],
                                   input=f"link set {nic} down\naddr flush dev {nic}\n"
                                         f"link set {nic} netns 1\n",
                                   capture_output=True, text=True, check=False)
            if moved.returncode != 0 and _sysfs(nic, "ifindex") is None:
                warnings.append(f"{nic} could not be taken back from {ns}: "
                                f"{' '.join(moved.stderr.split())}")
                continue
        if _sysfs(nic, "ifindex") is None:
            warnings.append(f"{nic} is gone from this machine")
            continue
        lines = [f"addr flush dev {nic}"]
        if rec.get("mtu"):
            lines.append(f"link set {nic} mtu {int(rec['mtu'])}")
        lines.append(f"link set {nic} {'up' if rec.get('up') else 'down'}")
        done = subprocess.run(["ip", "-force", "-batch", "-"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            warnings.append(f"{nic}: {' '.join(done.stderr.split())}")
    return warnings


# ---------------------------------------------------------------- reading devices


@dataclass
class DeviceView:
    """What a device showed at lab up: its interfaces' addresses, and the address
    its SSH server was reached at."""
    node: str
    addrs: dict[str, list[Iface]] = field(default_factory=dict)
    reached: str | None = None

    def holder(self, addr: str) -> tuple[str, Iface] | None:
        ip = ip_address(addr)
        for name, lst in self.addrs.items():
            for a in lst:
                if a.ip == ip:
                    return name, a
        return None

    def listing(self) -> str:
        return "; ".join(f"{n} {' '.join(str(a) for a in lst)}"
                         for n, lst in self.addrs.items() if lst) or "none"


def parse_ip_addr(text: str) -> dict[str, list[Iface]]:
    """`ip addr show` of iproute2 or BusyBox: interface -> addresses with prefix."""
    out: dict[str, list[Iface]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _IFACE_LINE.match(line)
        if m is not None:
            current = m.group(1)
            out.setdefault(current, [])
            continue
        m = _ADDR_LINE.match(line)
        if m is not None and current is not None:
            try:
                out[current].append(ip_interface(m.group(1)))
            except ValueError:
                continue
    return out


def connect(lab: Lab, factory: Connect) -> dict[str, Executor]:
    """One executor per device, connected in parallel; an unreachable or refusing
    device is a SpecError at its `ssh` key, naming it and why."""
    devices = lab.devices()
    if not devices:
        return {}

    def one(node: Node) -> Executor:
        ex = factory(node.name, ssh_entry(node, lab))
        ex.run(["true"], timeout=30)
        return ex

    pool = ThreadPoolExecutor(max_workers=min(16, len(devices)))
    futures = {n.name: pool.submit(one, n) for n in devices}
    pool.shutdown(wait=True)
    got: dict[str, Executor] = {}
    failure: SpecError | None = None
    for node in devices:
        try:
            got[node.name] = futures[node.name].result()
        except (ExecutorError, UsageError, TimeoutError, OSError) as exc:
            if failure is None:
                assert node.ssh is not None
                failure = spec_error(lab, ("nodes", node.name, "ssh"),
                                     f"device {node.name} ({node.ssh.destination}): {exc}")
    if failure is not None:
        close(got.values())
        raise failure
    return got


def close(executors: Iterable[Executor]) -> None:
    for ex in executors:
        try:
            ex.close()
        except Exception:  # closing is best effort; the connection may be gone
            continue


def view(ex: Executor) -> DeviceView:
    got = ex.run(["ip", "addr", "show"], timeout=30)
    if got.returncode != 0:
        raise LabError(f"device {ex.node}: ip addr show failed: {got.stderr.strip()} "
                       f"({install_hint('ip')})")
    v = DeviceView(ex.node, parse_ip_addr(got.stdout))
    env = ex.run(["printenv", "SSH_CONNECTION"], timeout=30)
    fields = env.stdout.split()
    if env.returncode == 0 and len(fields) >= 3:
        v.reached = fields[2]
    return v


def resolve(lab: Lab, views: Mapping[str, DeviceView], *, after_setup: bool = False) -> Lab:
    """The lab with each device end's address, prefix and interface filled from what
    the device has; an address the file names that the device lacks is a SpecError.

    A device with setup commands may lack an address its setup makes (a WireGuard hop's,
    say): with its prefix known, it is taken as given, and checked again once the setup
    ran (`after_setup`: then a missing address is a LabError, and the lab comes down)."""
    links = [_resolve_link(lab, link, views, after_setup) if link.device_ends else link
             for link in lab.links]
    return replace(lab, links=tuple(links))


def _resolve_link(lab: Lab, link: Link, views: Mapping[str, DeviceView],
                  after_setup: bool) -> Link:
    ends = []
    fields: dict[str, Iface] = {}
    for end in link.device_ends:
        v = views[end.node]
        where = ("links", link.index, "addresses", end.node)
        addr = str(end.address) if end.address is not None else v.reached
        if addr is None:
            raise spec_error(lab, where, f"give {end.node}'s address: its SSH server did not "
                                         f"say which address it was reached at")
        held = v.holder(addr)
        # A port cabled to this machine is there before any setup; a hop between two
        # devices may be a tunnel their setup commands make.
        made_by_setup = bool(lab.node(end.node).setup) and end.prefixlen is not None \
            and not link.attach
        if held is None and after_setup:
            raise LabError(f"{addr} is not an address of device {end.node} after its setup "
                           f"commands (it has: {v.listing()}); {lab.source}: "
                           f"links[{link.index}].addresses.{end.node}")
        if held is None and not made_by_setup:
            said = "the address SSH reached, " if end.address is None else ""
            later = " (an address its setup commands make needs its prefix length here)" \
                if lab.node(end.node).setup else ""
            raise spec_error(lab, where, f"{said}{addr} is not an address of device "
                                         f"{end.node} (it has: {v.listing()}){later}")
        ifname, found = held if held is not None else (None, None)
        plen = end.prefixlen if end.prefixlen is not None else \
            found.network.prefixlen if found is not None else 32
        iface = ip_interface(f"{addr}/{plen}")
        side = "a" if end.node == link.a else "b"
        ns_end = link.b if side == "a" else link.a
        other = getattr(link, f"addr_{'b' if side == 'a' else 'a'}{iface.version}")
        if end.address is None and link.nic(ns_end) is not None:
            if other is None or iface.ip not in other.network:
                raise spec_error(lab, ("links", link.index, "addresses", ns_end),
                                 f"{ns_end}'s address must share a subnet with {addr}, the "
                                 f"address SSH reaches {end.node} at")
            iface = ip_interface(f"{addr}/{other.network.prefixlen}")
        fields[f"addr_{side}{iface.version}"] = iface
        ends.append(replace(end, address=iface.ip, prefixlen=iface.network.prefixlen,
                            ifname=ifname))
    resolved = replace(link, device_ends=tuple(ends), **fields)  # type: ignore[arg-type]
    for version in (4, 6):
        a, b = getattr(resolved, f"addr_a{version}"), getattr(resolved, f"addr_b{version}")
        if (a is None) != (b is None):
            raise spec_error(lab, ("links", link.index, "addresses"),
                             f"only one end has an IPv{version} address")
        if a is not None and b is not None and a.network != b.network and not link.attach:
            # Two devices cabled to each other: each keeps its own prefix, but the planner
            # needs one subnet per link.
            b = ip_interface(f"{b.ip}/{a.network.prefixlen}")
            if b.network != a.network:
                raise spec_error(lab, ("links", link.index, "addresses"),
                                 f"{a} and {b.ip} are not on one subnet")
            resolved = replace(resolved, **{f"addr_b{version}": b})  # type: ignore[arg-type]
    return resolved


# ---------------------------------------------------------------- tools


def tools_needed(lab: Lab, plan: Plan | None = None) -> dict[str, set[str]]:
    """The tools the lab file's device settings need, per device."""
    out: dict[str, set[str]] = {}
    for node in lab.devices():
        need = out.setdefault(node.name, {"ip"})
        if node.offloads or node.iface_offloads:
            need.add("ethtool")
        if node.sysctls:
            need.add("tee")
        for argv in (*node.setup, *node.teardown):
            need.add(argv[0])
    return out


def check_tools(lab: Lab, executors: Mapping[str, Executor],
                needs: Mapping[str, Collection[str]], why: Mapping[str, str] | None = None
                ) -> None:
    """Refuse (exit 2) when a device lacks a tool: names it and its packages."""
    for node, tools in needs.items():
        ex = executors.get(node)
        if ex is None or not tools:
            continue
        found = ex.which(sorted(tools))
        missing = sorted(t for t, path in found.items() if path is None)
        for tool, (argv, mark, lacks) in _KIND_OF_TOOL.items():
            if tool in tools and found.get(tool) is not None and not missing:
                said = ex.run(argv, timeout=30)
                if mark not in said.stdout + said.stderr:
                    reason = (why or {}).get(f"{node}:{tool}", "this lab")
                    raise spec_error(lab, ("nodes", node, "ssh"),
                                     f"device {node} has a {tool} without {lacks}, which "
                                     f"{reason} needs: {install_hint(tool)}")
        if missing:
            tool = missing[0]
            reason = (why or {}).get(f"{node}:{tool}", "this lab")
            raise spec_error(lab, ("nodes", node, "ssh"),
                             f"device {node} lacks {tool}, which {reason} needs: "
                             f"{install_hint(tool)}")


# ---------------------------------------------------------------- settings


def _device_ifaces(plan: Plan, node: str) -> list[str]:
    return [i.name for i in plan.node(node).ifaces if i.kind == "device"]


def parse_ethtool_k(text: str) -> dict[str, bool]:
    """`ethtool -k IFACE`: long feature name -> on."""
    out: dict[str, bool] = {}
    for line in text.splitlines():
        name, sep, rest = line.strip().partition(":")
        words = rest.split()
        if sep and words and words[0] in ("on", "off"):
            out[name] = words[0] == "on"
    return out


def _check(ex: Executor, argv: list[str], what: str, *, input: str | None = None,
           timeout: float = 60.0) -> str:
    done = ex.run(argv, input=input, timeout=timeout)
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).split())[-300:]
        raise LabError(f"device {ex.node}: {what}: exit {done.returncode}: {tail}")
    return done.stdout


def apply(state: LabState, plan: Plan, executors: Mapping[str, Executor]) -> None:
    """Change what the lab file asks of each device: each previous value is written to
    the state record before the new one is set; setup commands run last."""
    for node in plan.lab.devices():
        ex = executors[node.name]
        rec = state.devices[node.name]
        for key, value in node.sysctls:
            path = "/proc/sys/" + key.replace(".", "/")
            old = ex.read_file(path)
            if old is None:
                raise LabError(f"device {node.name}: sysctl {key} does not exist there")
            rec["sysctls"].append([key, old.decode().strip()])
            state.save()
            _check(ex, ["tee", path], f"sysctl {key} = {value}", input=f"{value}\n")
        wanted = [(i, f, on) for i in _device_ifaces(plan, node.name) for f, on in node.offloads]
        wanted += list(node.iface_offloads)
        current: dict[str, dict[str, bool]] = {}
        for iface, feat, on in wanted:
            if iface not in current:
                current[iface] = parse_ethtool_k(_check(ex, ["ethtool", "-k", iface],
                                                        f"offloads of {iface}"))
            long = FEATURE_NAMES[feat]
            if long not in current[iface]:
                raise LabError(f"device {node.name}: {iface} has no {feat} ({long}) offload")
            rec["offloads"].append([iface, feat, current[iface][long]])
            state.save()
            _check(ex, ["ethtool", "-K", iface, feat, "on" if on else "off"],
                   f"ethtool -K {iface} {feat} {'on' if on else 'off'}")
        rec["setup_started"] = True
        state.save()
        for k, argv in enumerate(node.setup):
            _tracked(state, ex, list(argv), k)


def _tracked(state: LabState, ex: Executor, argv: list[str], k: int) -> None:
    """A setup command, written into the lab's record while it runs: a SIGKILL of hoplab
    leaves it running on the device, and clean stops it there."""
    from hoplab.lab.state import Proc

    what = f"setup {' '.join(argv)}"
    logs = state.rundir / "devices"
    logs.mkdir(parents=True, exist_ok=True)
    recs: list[Proc] = []

    def note(p: Process) -> None:
        # Saved before the command runs on the device (it waits for this).
        recs.append(Proc(p.ident.pid, p.ident.start_ticks, argv, ex.node, what))
        state.processes.append(recs[0])
        state.save()

    proc = ex.start(what, argv, out=logs / f"{ex.node}-setup{k}.out",
                    err=logs / f"{ex.node}-setup{k}.err", noted=note)
    rec = recs[0]
    try:
        code = proc.wait(SETUP_TIMEOUT_S)
    except TimeoutError:
        ex.stop(proc)
        raise LabError(f"device {ex.node}: {what} did not finish in {SETUP_TIMEOUT_S:g} s; "
                       f"stopped") from None
    finally:
        state.processes.remove(rec)
        state.save()
    if code != 0:
        said = proc.err.read_text(errors="replace") if proc.err.exists() else ""
        if not said.strip() and proc.out.exists():
            said = proc.out.read_text(errors="replace")
        raise LabError(f"device {ex.node}: {what}: exit {code}: "
                       f"{' '.join(said.split())[-300:]}")


def record_devices(state: LabState, lab: Lab) -> None:
    """Write down, before anything changes, how to reach each device again and which
    teardown commands undo its setup."""
    for node in lab.devices():
        state.devices[node.name] = {**ssh_entry(node, lab), "sysctls": [], "offloads": [],
                                    "teardown": [list(c) for c in node.teardown],
                                    "setup_started": False}
    state.save()


def restore(state: LabState, nodes: Mapping[str, Executor], *,
            run_hooks: bool = True) -> list[str]:
    """Put every device back as the record says: teardown commands (when its setup
    began), then offloads and sysctls, newest first. Uses the executors in `nodes`
    (teardown's, from the summary) or reconnects from the record; never stops half
    way: what could not be done comes back as warnings that say what is left."""
    from hoplab.nodes.registry import executor_for

    warnings: list[str] = []
    for node, rec in state.devices.items():
        todo: list[tuple[list[str], str | None, str]] = []
        if run_hooks and rec.get("setup_started"):
            todo += [(list(argv), None, f"teardown {' '.join(argv)}")
                     for argv in rec.get("teardown", [])]
        for iface, feat, on in reversed(rec.get("offloads", [])):
            todo.append((["ethtool", "-K", iface, feat, "on" if on else "off"], None,
                         f"offload {feat} of {iface} back {'on' if on else 'off'}"))
        for key, old in reversed(rec.get("sysctls", [])):
            todo.append((["tee", "/proc/sys/" + key.replace(".", "/")], f"{old}\n",
                         f"sysctl {key} back to {old}"))
        if not todo:
            continue
        own = node not in nodes
        try:
            ex = nodes[node] if not own else executor_for(node, rec)
        except Exception as exc:  # unreachable now: say what is left to do by hand
            warnings.append(f"device {node}: cannot reconnect ({exc}); not done: "
                            + "; ".join(what for _a, _i, what in todo))
            continue
        try:
            for argv, data, what in todo:
                try:
                    done = ex.run(argv, input=data, timeout=120)
                    if done.returncode != 0:
                        warnings.append(f"device {node}: {what}: exit {done.returncode}: "
                                        + " ".join(done.stderr.split())[-200:])
                except Exception as exc:
                    warnings.append(f"device {node}: {what}: {exc}")
        finally:
            if own:
                close([ex])
    return warnings


# ---------------------------------------------------------------- labels


def device_labels(lab: Lab, nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Labels `device` and `firmware` of a run on a lab with devices, from each device's
    facts in the run's metadata (`nodes`): its model (else the host SSH reaches) and its
    firmware, so runs of two devices or two builds never fall in one group by accident.
    One device gives its values; several give "node=value" pairs."""
    found: dict[str, list[tuple[str, str]]] = {"device": [], "firmware": []}
    for node in lab.devices():
        facts = nodes.get(node.name, {})
        assert node.ssh is not None
        found["device"].append((node.name, str(facts.get("model") or node.ssh.host)))
        firmware = facts.get("firmware")
        if firmware:
            found["firmware"].append((node.name, str(firmware)))
    out: dict[str, str] = {}
    for key, pairs in found.items():
        if len(pairs) == 1 and len(lab.devices()) == 1:
            out[key] = pairs[0][1]
        elif pairs:
            out[key] = ", ".join(f"{n}={v}" for n, v in pairs)
    return out


def test_tools(lab: Lab, tests: Iterable[Any]) -> tuple[dict[str, set[str]], dict[str, str]]:
    """What the tests will run on each device (a flow's client on its source, its server
    on its destination; ping needs no server), and which test needs each, for
    check_tools' message."""
    from hoplab.kind_registry import flow_tool

    devices = {n.name for n in lab.devices()}
    needs: dict[str, set[str]] = {}
    why: dict[str, str] = {}
    for test in tests:
        for flow in test.flows:
            ft = flow_tool(flow.kind)
            ends = [(flow.src, ft.tool)]
            if ft.tool != "ping":
                ends.append((flow.dst, ft.server_tool or ft.tool))
            for node, tool in ends:
                if node in devices:
                    needs.setdefault(node, set()).add(tool)
                    why.setdefault(f"{node}:{tool}", f"test {test.name!r}")
    return needs, why


def clock_offsets(nodes: Mapping[str, Executor]) -> dict[str, dict[str, Any]]:
    """Each other machine's clock offset against this one, with its uncertainty, by the
    nodes on it (hoplab.nodes.clock): what a run's one-way figures on a device may rely
    on. A namespace shares this machine's clock, so it has none. A machine that does not
    answer gets its error instead (the run itself will say what failed)."""
    from hoplab.nodes.clock import estimate

    by_machine: dict[str, list[str]] = {}
    for name, ex in nodes.items():
        if ex.machine != "local":
            by_machine.setdefault(ex.machine, []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for names in by_machine.values():
        try:
            got: dict[str, Any] = estimate(nodes[names[0]]).as_metadata()
        except (ExecutorError, TimeoutError, OSError) as exc:
            got = {"error": str(exc)}
        for name in names:
            out[name] = {**got, "node": name}
    return out


def reboots(nodes: Mapping[str, Executor], settings: Mapping[str, Mapping[str, Any]],
            seen: dict[str, tuple[str, float]]) -> dict[str, str]:
    """Nodes whose machine rebooted since the previous run: its boot id changed or its
    uptime went back, in the facts read when its lab was built (`settings`; a lab is
    built again after a failed run) against those `seen` before, or by its executor's own
    look since. Recorded on the run: a rebooted device lost what was set at lab up."""
    out: dict[str, str] = {}
    for name, facts in settings.items():
        boot, uptime = facts.get("boot_id"), facts.get("uptime_s")
        if boot is None and uptime is None:
            continue
        prev = seen.get(name)
        now = (str(boot or ""), float(uptime or 0.0))
        seen[name] = now
        if prev is not None and ((now[0] and prev[0] and now[0] != prev[0])
                                 or (uptime is not None and now[1] < prev[1])):
            out[name] = "rebooted since the previous run (boot id changed, uptime went back)"
    for name, ex in nodes.items():
        if name in out:
            continue
        try:
            if ex.check_rebooted():
                out[name] = "rebooted since hoplab last looked (uptime went back)"
        except (ExecutorError, TimeoutError, OSError) as exc:
            out[name] = f"could not tell whether it rebooted: {exc}"
    return out
