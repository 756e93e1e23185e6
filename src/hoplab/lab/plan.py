"""Address and route planning: a pure function from a Lab to what each node gets.

Routes are shortest paths (fewest hops; ties go to the lower link index). To
keep a 1000-node chain cheap, each node's routes are aggregated: the next hop
that serves most destinations gets one route per address pool, and the other
destinations are collapsed into the fewest prefixes. Links are numbered in
file order, so along a chain every side of a router is one contiguous block.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
)
from typing import Any

from hoplab.errors import SpecError
from hoplab.lab.devices.reach import ssh_entry
from hoplab.lab.state import find as find_state
from hoplab.lab.where import netns_prefix
from hoplab.spec.families import carries
from hoplab.spec.model import Direction, Lab, Link, Tunnel

IPNetwork = IPv4Network | IPv6Network
IPInterface = IPv4Interface | IPv6Interface


@dataclass(frozen=True)
class Iface:
    """One interface of a node."""

    name: str
    # "veth"; "nic" (a host NIC cabled to a device, moved into a namespace); "device"
    # (a device's own interface, which hoplab reads and never configures); "guest" (a
    # VM's NIC, configured in the guest); "tap" (a namespace's end of a link to a VM:
    # the tap QEMU holds, made in the namespace when the VM boots);
    # "wg-hop" | "wg-tunnel"
    kind: str
    link: int | None  # link index, None for end-to-end tunnels
    peer: str  # the node on the other end
    addrs: tuple[IPInterface, ...]
    egress: Direction = field(default_factory=Direction)
    mtu: int | None = None
    tunnel: str | None = None  # tunnel name for wg-tunnel


@dataclass(frozen=True)
class Route:
    dst: IPNetwork
    gateway: str  # address of the next hop
    dev: str


@dataclass(frozen=True)
class WgEnd:
    """One end of a WireGuard pair: interface `ifname` on `node`, reaching `peer`."""

    node: str
    ifname: str
    peer: str
    peer_ifname: str
    endpoint: str  # peer's underlay address
    listen_port: int
    allowed: tuple[str, ...]


@dataclass(frozen=True)
class NodePlan:
    name: str
    netns: str
    forward: bool
    ifaces: tuple[Iface, ...]
    routes: tuple[Route, ...]
    primary4: IPv4Address | None
    primary6: IPv6Address | None


@dataclass(frozen=True)
class Plan:
    lab: Lab
    nodes: tuple[NodePlan, ...]
    wireguard: tuple[WgEnd, ...]
    hosts: tuple[tuple[str, str], ...]  # (address, name)
    diameter: int = 0  # the most hops between two nodes

    def node(self, name: str) -> NodePlan:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def path(self, src: str, dst: str, family: int = 4) -> list[str]:
        """The nodes a packet from src to dst's address crosses, ends included, as the
        planned routes send it (see route_path)."""
        return route_path(self, src, dst, family)

    def node_entries(self) -> dict[str, dict[str, Any]]:
        """Each node's entry in the lab's summary: what the executor registry
        (hoplab.nodes.registry.executors) needs to reach it, from a later process too."""
        return {n.name: _node_entry(n, self.lab) for n in self.nodes}


def _node_entry(n: NodePlan, lab: Lab) -> dict[str, Any]:
    spec = lab.node(n.name)
    entry: dict[str, Any] = {
        "netns": n.netns,
        "forward": n.forward,
        "ipv4": str(n.primary4) if n.primary4 else None,
        "ipv6": str(n.primary6) if n.primary6 else None,
        "interfaces": [
            {"name": i.name, "kind": i.kind, "peer": i.peer, "link": i.link,
             "addresses": [a.with_prefixlen for a in i.addrs]}
            for i in n.ifaces
        ],
        "routes": len(n.routes),
        "nat": spec.nat.out if spec.nat else None,
        "teardown": [list(c) for c in spec.teardown],
    }
    if spec.node_kind.builds == "qemu":
        # Booted by hoplab.lab.vm, which records how to reach it (its SSH port, keys)
        # and what it is (kernel release, vCPUs, accelerator) in the lab's record.
        entry.update({"kind": spec.kind, "netns": None, **_booted(lab.name, n.name)})
    elif not spec.node_kind.local:
        # Reached over SSH (hoplab.nodes.registry); its teardown commands run from the
        # state's device record, with its settings put back (lab.devices.settings).
        entry.update(ssh_entry(spec, lab), netns=None, teardown=[])
    return entry


def _booted(lab: str, node: str) -> dict[str, Any]:
    state = find_state(lab)
    entry = state.summary.get("nodes", {}).get(node, {}) if state is not None else {}
    return {k: entry[k] for k in ("ssh", "vm") if k in entry}


WG_BASE_PORT = 51820
# Interfaces that carry a link's own addresses (not a tunnel's).
UNDERLAY = ("veth", "nic", "device", "guest", "tap")


def netns_name(lab: str, node: str) -> str:
    """Node `node`'s namespace: unambiguous, this instance's (hoplab.lab.where)."""
    return netns_prefix(lab) + node


def _subnets(pool: IPNetwork, new_prefix: int, count: int, taken: set[IPNetwork],
             key: str, source: str) -> list[IPNetwork]:
    """The first `count` subnets of `pool` that overlap nothing in `taken`."""
    if pool.prefixlen > new_prefix:
        raise SpecError(f"pool {pool} is smaller than one /{new_prefix} subnet",
                        file=source, key=key)
    out: list[IPNetwork] = []
    if count == 0:
        return out
    for net in pool.subnets(new_prefix=new_prefix):
        if any(net.overlaps(t) for t in taken):
            continue
        out.append(net)
        if len(out) == count:
            return out
    raise SpecError(f"address pool {pool} is too small for {count} links", file=source, key=key)


def _pair(net: IPNetwork) -> tuple[IPInterface, IPInterface]:
    hosts = net.hosts()
    a, b = next(hosts), next(hosts)
    return (ipaddress.ip_interface(f"{a}/{net.prefixlen}"),
            ipaddress.ip_interface(f"{b}/{net.prefixlen}"))


@dataclass
class _Edge:
    """A routed adjacency: from `node`, out of `dev`, to `peer` via `gateways`."""

    link: int
    node: str
    peer: str
    dev: str
    gw4: str | None
    gw6: str | None


def _link_addresses(lab: Lab) -> tuple[dict[int, tuple[IPInterface, ...]],
                                        dict[int, tuple[IPInterface, ...]],
                                        dict[int, tuple[IPInterface, ...]],
                                        dict[int, tuple[IPInterface, ...]]]:
    """Underlay addresses (a side, b side) and per-hop overlay addresses per link."""
    ad = lab.addressing
    src = lab.source
    explicit: set[IPNetwork] = set()
    for link in lab.links:
        mine = {net for net in (link.subnet4, link.subnet6) if net is not None}
        mine |= {a.network for a in (link.addr_a4, link.addr_a6) if a is not None}
        for net in mine:
            # Two links on one subnet would put one address on two nodes.
            clash = next((o for o in explicit if o.version == net.version
                          and o.overlaps(net)), None)
            if clash is not None:
                raise SpecError(f"subnet {net} overlaps {clash} of an earlier link",
                                file=src, key=f"links[{link.index}]")
        explicit |= mine
        explicit |= {a.network for a in (link.addr_b4, link.addr_b6) if a is not None}
    for link in lab.links:
        if _unresolved(link):
            # The lab engine reads a device's addresses before it plans (devices.resolve).
            raise SpecError(f"{link.label}: the device's address is not known yet",
                            file=src, key=f"links[{link.index}].addresses")
    # A cable carries only the families its ends have; nothing is planned on it.
    need4 = [lk for lk in lab.links if lk.subnet4 is None and lk.addr_a4 is None
             and not lk.is_cable]
    need6 = [lk for lk in lab.links if lk.subnet6 is None and lk.addr_a6 is None
             and not lk.is_cable]
    auto4 = iter(_subnets(ad.pool4, 30, len(need4), explicit, "addressing.pool4", src))
    auto6 = iter(_subnets(ad.pool6, 64, len(need6) if ad.ipv6 else 0, explicit,
                          "addressing.pool6", src))
    hops = [lk for lk in lab.links if lk.wireguard]
    over4 = iter(_subnets(ad.tunnel_pool4, 30, len(hops), explicit,
                          "addressing.tunnel_pool4", src))
    over6 = iter(_subnets(ad.tunnel_pool6, 64, len(hops) if ad.ipv6 else 0, explicit,
                          "addressing.tunnel_pool6", src))
    a_side: dict[int, tuple[IPInterface, ...]] = {}
    b_side: dict[int, tuple[IPInterface, ...]] = {}
    oa: dict[int, tuple[IPInterface, ...]] = {}
    ob: dict[int, tuple[IPInterface, ...]] = {}
    for link in lab.links:
        pairs = []
        if carries(lab, link, 4):
            pairs.append(_family_pair(link.addr_a4, link.addr_b4, link.subnet4, auto4))
        if carries(lab, link, 6):
            pairs.append(_family_pair(link.addr_a6, link.addr_b6, link.subnet6, auto6))
        a_side[link.index] = tuple(p[0] for p in pairs)
        b_side[link.index] = tuple(p[1] for p in pairs)
        if link.wireguard:
            o = [_pair(next(over4))]
            if ad.ipv6:
                o.append(_pair(next(over6)))
            oa[link.index] = tuple(p[0] for p in o)
            ob[link.index] = tuple(p[1] for p in o)
    return a_side, b_side, oa, ob


def _family_pair(a: IPInterface | None, b: IPInterface | None, subnet: IPNetwork | None,
                 auto: Iterator[IPNetwork]) -> tuple[IPInterface, IPInterface]:
    if a is not None and b is not None:
        return a, b
    if subnet is not None:  # the loader checked it has room for two hosts
        return _pair(subnet)
    return _pair(next(auto))


def _unresolved(link: Link) -> bool:
    return link.is_cable and ((link.addr_a4 is None) != (link.addr_b4 is None)
                              or (link.addr_a6 is None) != (link.addr_b6 is None)
                              or (link.addr_a4 is None and link.addr_a6 is None))


def unresolved(lab: Lab) -> bool:
    """Whether a device end's address is still to be read from the device (at lab up,
    hoplab.lab.devices.resolve), so the lab cannot be planned yet."""
    return any(_unresolved(lk) for lk in lab.links)


def _end_name(link: Link, node: str, veth: str, guests: Collection[str] = ()
              ) -> tuple[str, str]:
    """An end's interface name and kind: a veth named by the planner, the host NIC
    attached for a namespace, the device's own interface, a VM's NIC or the tap of a
    namespace's link to a VM (`guests`: the VM nodes)."""
    if node in guests:
        return veth, "guest"
    if (link.b if node == link.a else link.a) in guests:
        return veth, "tap"
    nic = link.nic(node)
    if nic is not None:
        return nic, "nic"
    end = link.device_end(node)
    if end is not None:
        return end.ifname or veth, "device"
    return veth, "veth"


def _bfs(start: int, adj: list[list[tuple[int, _Edge]]]) -> tuple[list[int], list[int]]:
    """Hop distance (-1: unreachable) to every node, and the set of `start`'s
    edges (bit k = adj[start][k]) that begin a shortest path to it."""
    dist = [-1] * len(adj)
    first = [0] * len(adj)
    dist[start] = 0
    for k, (peer, _) in enumerate(adj[start]):
        if dist[peer] < 0:
            dist[peer] = 1
        if dist[peer] == 1:
            first[peer] |= 1 << k
    queue: deque[int] = deque(peer for peer, _ in adj[start] if first[peer])
    while queue:
        cur = queue.popleft()
        # Every parent of `cur` sits one level up and was expanded before it,
        # so first[cur] is complete here.
        for peer, _ in adj[cur]:
            if dist[peer] < 0:
                dist[peer] = dist[cur] + 1
                first[peer] = first[cur]
                queue.append(peer)
            elif dist[peer] == dist[cur] + 1:
                first[peer] |= first[cur]
    return dist, first


@dataclass(frozen=True)
class _Subnets:
    """Every routed subnet, with what aggregation needs precomputed once."""

    pools: list[IPNetwork]
    pool: list[int]  # index into pools, -1 when the subnet lies outside them
    span: list[tuple[int, int, int]]  # (version, first address as int, size)


def _aggregate(groups: dict[int, list[int]], sub: _Subnets) -> list[tuple[int, IPNetwork]]:
    """(group, prefix) routes: the largest group gets whole pools, the others the
    fewest prefixes that cover exactly their subnets."""
    if not groups:
        return []
    biggest = max(groups, key=lambda k: (len(groups[k]), -k))
    out: list[tuple[int, IPNetwork]] = []
    for gid, idx in sorted(groups.items()):
        if gid == biggest:
            used = {sub.pool[i] for i in idx} - {-1}
            out.extend((gid, sub.pools[p]) for p in sorted(used))
            idx = [i for i in idx if sub.pool[i] < 0]
        out.extend((gid, n) for n in _collapse([sub.span[i] for i in idx]))
    return out


def _collapse(spans: Sequence[tuple[int, int, int]]) -> list[IPNetwork]:
    """Merge runs of adjacent subnets with integer arithmetic: linear after
    sorting, where ipaddress.collapse_addresses is too slow for big labs."""
    out: list[IPNetwork] = []
    runs: list[list[int]] = []
    for version, start, size in sorted(spans):
        if runs and runs[-1][0] == version and start <= runs[-1][2]:
            runs[-1][2] = max(runs[-1][2], start + size)
        else:
            runs.append([version, start, start + size])
    for version, lo, hi in runs:
        bits = 32 if version == 4 else 128
        cls = IPv4Network if version == 4 else IPv6Network
        while lo < hi:
            # The largest aligned block that starts at lo and ends within the run.
            size = lo & -lo if lo else 1 << bits
            while size > hi - lo:
                size >>= 1
            out.append(cls((lo, bits - size.bit_length() + 1)))
            lo += size
    return out


def _unicast_space(pools: list[IPNetwork], addrs: list[tuple[IPInterface, ...]]
                   ) -> tuple[str, ...]:
    """Every lab unicast address, as few prefixes. A hop tunnel allows these but no
    multicast: with ::/0 the kernel's own MLD reports at link-up would start a
    handshake from both ends at once, and that collision costs WireGuard a 5 s retry."""
    nets = list(pools) + [a.network for group in addrs for a in group]
    return tuple(str(n) for n in _collapse(
        [(n.version, int(n.network_address), n.num_addresses) for n in nets]))


def plan_lab(lab: Lab) -> Plan:
    a_side, b_side, oa, ob = _link_addresses(lab)
    names = lab.node_names()
    ifaces: dict[str, list[Iface]] = {n: [] for n in names}
    adj: dict[str, list[_Edge]] = {n: [] for n in names}
    subnet_owner: list[tuple[IPNetwork, str, str]] = []  # (subnet, node a, node b)
    wg: list[WgEnd] = []
    counter = {n: 0 for n in names}
    pools: list[IPNetwork] = [lab.addressing.pool4, lab.addressing.tunnel_pool4]
    if lab.addressing.ipv6:
        pools += [lab.addressing.pool6, lab.addressing.tunnel_pool6]
    space = _unicast_space(pools, [*a_side.values(), *oa.values()])
    guests = {n.name for n in lab.nodes if n.node_kind.links == "guest"}
    # A firmware image's first NIC is its own management port (OpenWrt's LAN, eth0):
    # its lab NICs come after it, as its kernel names them.
    first = {n.name: int(n.vm is not None and n.vm.image is not None) for n in lab.nodes}
    for link in lab.links:
        ia, ib = counter[link.a] + first[link.a], counter[link.b] + first[link.b]
        counter[link.a] += 1
        counter[link.b] += 1
        na, ka = _end_name(link, link.a, f"eth{ia}", guests)
        nb, kb = _end_name(link, link.b, f"eth{ib}", guests)
        ifaces[link.a].append(Iface(na, ka, link.index, link.b, a_side[link.index],
                                    link.forward, link.mtu))
        ifaces[link.b].append(Iface(nb, kb, link.index, link.a, b_side[link.index],
                                    link.reverse, link.mtu))
        for x in a_side[link.index]:
            subnet_owner.append((x.network, link.a, link.b))
        if link.wireguard:
            wa, wb = f"wg{ia}", f"wg{ib}"
            ifaces[link.a].append(Iface(wa, "wg-hop", link.index, link.b, oa[link.index]))
            ifaces[link.b].append(Iface(wb, "wg-hop", link.index, link.a, ob[link.index]))
            for x in oa[link.index]:
                subnet_owner.append((x.network, link.a, link.b))
            port = WG_BASE_PORT + link.index
            ua, ub = a_side[link.index][0].ip, b_side[link.index][0].ip
            wg.append(WgEnd(link.a, wa, link.b, wb, f"{ub}:{port}", port, space))
            wg.append(WgEnd(link.b, wb, link.a, wa, f"{ua}:{port}", port, space))
            routed_a, routed_b, dev_a, dev_b = oa[link.index], ob[link.index], wa, wb
        else:
            routed_a, routed_b, dev_a, dev_b = a_side[link.index], b_side[link.index], na, nb
        adj[link.a].append(_Edge(link.index, link.a, link.b, dev_a, *_gws(routed_b)))
        adj[link.b].append(_Edge(link.index, link.b, link.a, dev_b, *_gws(routed_a)))

    prim4, prim6 = _primaries(ifaces)
    tunnel_ends = _tunnels(lab, ifaces, prim4, prim6, wg)
    routes, diameter = _routes(names, adj, subnet_owner, pools)
    nodes: list[NodePlan] = []
    for node in lab.nodes:
        n = node.name
        forward = node.forward if node.forward is not None else len(adj[n]) >= 2
        nodes.append(NodePlan(n, netns_name(lab.name, n), forward,
                              tuple(ifaces[n]) + tunnel_ends.get(n, ()), routes[n],
                              prim4.get(n), prim6.get(n)))
    hosts = _hosts(lab, nodes, tunnel_ends)
    return Plan(lab, tuple(nodes), tuple(wg), hosts, diameter)


def _routes(names: tuple[str, ...], adj: dict[str, list[_Edge]],
            owners: list[tuple[IPNetwork, str, str]], pools: list[IPNetwork]
            ) -> tuple[dict[str, tuple[Route, ...]], int]:
    """Shortest-path routes of every node to every subnet it is not attached to."""
    pos = {n: k for k, n in enumerate(names)}
    graph = [[(pos[e.peer], e) for e in adj[n]] for n in names]
    sub = _Subnets(
        pools=pools,
        pool=[next((k for k, p in enumerate(pools) if p.version == net.version
                    and net.subnet_of(p)), -1)  # type: ignore[arg-type]
              for net, _, _ in owners],
        span=[(net.version, int(net.network_address), net.num_addresses)
              for net, _, _ in owners],
    )
    ends = [(pos[x], pos[y], net.version) for net, x, y in owners]
    out: dict[str, tuple[Route, ...]] = {}
    diameter = 0
    for me, name in enumerate(names):
        dist, first = _bfs(me, graph)
        diameter = max(diameter, *dist)
        mine = [e for _, e in graph[me]]
        family = {4: sum(1 << k for k, e in enumerate(mine) if e.gw4 is not None),
                  6: sum(1 << k for k, e in enumerate(mine) if e.gw6 is not None)}
        groups: dict[int, list[int]] = {}
        # Where several first hops are equally short, keep the one the previous
        # subnet took: subnets are numbered along the topology, so long runs with
        # one next hop collapse into few prefixes (a grid's rows, for one).
        prev = {4: 0, 6: 0}
        for i, (x, y, version) in enumerate(ends):
            if me in (x, y):
                continue
            dx, dy = dist[x], dist[y]
            if dx < 0 and dy < 0:
                continue
            if dx == dy:
                options = first[x] | first[y]
            else:
                options = first[y] if dx < 0 or (0 <= dy < dx) else first[x]
            options &= family[version]
            if not options:
                continue
            pick = prev[version] if prev[version] & options else options & -options
            prev[version] = pick
            groups.setdefault(pick.bit_length() - 1, []).append(i)
        edges = dict(enumerate(mine))
        routes = []
        for gid, prefix in _aggregate(groups, sub):
            e = edges[gid]
            gw = e.gw4 if prefix.version == 4 else e.gw6
            assert gw is not None
            routes.append(Route(prefix, gw, e.dev))
        out[name] = tuple(routes)
    return out, diameter


def _gws(addrs: tuple[IPInterface, ...]) -> tuple[str | None, str | None]:
    g4 = next((str(a.ip) for a in addrs if a.version == 4), None)
    g6 = next((str(a.ip) for a in addrs if a.version == 6), None)
    return g4, g6


def _primaries(ifaces: dict[str, list[Iface]]
               ) -> tuple[dict[str, IPv4Address], dict[str, IPv6Address]]:
    p4: dict[str, IPv4Address] = {}
    p6: dict[str, IPv6Address] = {}
    for n, lst in ifaces.items():
        for i in lst:
            if i.kind not in UNDERLAY:
                continue
            for a in i.addrs:
                if isinstance(a, IPv4Interface):
                    p4.setdefault(n, a.ip)
                else:
                    p6.setdefault(n, a.ip)
    return p4, p6


def _tunnels(lab: Lab, ifaces: dict[str, list[Iface]],
             p4: dict[str, IPv4Address], p6: dict[str, IPv6Address],
             wg: list[WgEnd]) -> dict[str, tuple[Iface, ...]]:
    """End-to-end tunnels: a WireGuard pair whose endpoints are the nodes' primaries."""
    out: dict[str, list[Iface]] = {}
    ad = lab.addressing
    taken: set[IPNetwork] = {x.network for lst in ifaces.values() for i in lst
                             for x in i.addrs}
    for t in lab.tunnels:
        pa4, pb4 = _tunnel_pair(t, t.subnet4, ad.tunnel_pool4, 30, taken, lab.source)
        addrs_a: list[IPInterface] = [pa4]
        addrs_b: list[IPInterface] = [pb4]
        if ad.ipv6:
            pa6, pb6 = _tunnel_pair(t, t.subnet6, ad.tunnel_pool6, 64, taken, lab.source)
            addrs_a.append(pa6)
            addrs_b.append(pb6)
        ifname = f"wg-{t.name}"
        port = WG_BASE_PORT + len(lab.links) + lab.tunnels.index(t)
        if t.b not in p4 or t.a not in p4:
            raise SpecError(f"tunnel {t.name!r} joins a node without links", file=lab.source,
                            key=f"tunnels.{t.name}")
        allowed_a = tuple(str(x.network) for x in addrs_b)
        wg.append(WgEnd(t.a, ifname, t.b, ifname, f"{p4[t.b]}:{port}", port, allowed_a))
        wg.append(WgEnd(t.b, ifname, t.a, ifname, f"{p4[t.a]}:{port}", port, allowed_a))
        out.setdefault(t.a, []).append(Iface(ifname, "wg-tunnel", None, t.b, tuple(addrs_a),
                                             tunnel=t.name))
        out.setdefault(t.b, []).append(Iface(ifname, "wg-tunnel", None, t.a, tuple(addrs_b),
                                             tunnel=t.name))
    return {k: tuple(v) for k, v in out.items()}


def _tunnel_pair(t: Tunnel, subnet: IPNetwork | None, pool: IPNetwork, plen: int,
                 taken: set[IPNetwork], source: str) -> tuple[IPInterface, IPInterface]:
    net = subnet if subnet is not None else _subnets(pool, plen, 1, taken,
                                                     f"tunnels.{t.name}", source)[0]
    taken.add(net)
    return _pair(net)


def _hosts(lab: Lab, nodes: list[NodePlan], tunnels: dict[str, tuple[Iface, ...]]
           ) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for n in nodes:
        # "NAME-v4" and "NAME-v6" pick a family where a tool would otherwise choose.
        if n.primary4 is not None:
            out.append((str(n.primary4), f"{n.name} {n.name}-v4"))
        if n.primary6 is not None:
            out.append((str(n.primary6), f"{n.name} {n.name}-v6"))
    for node, lst in tunnels.items():
        for i in lst:
            for a in i.addrs:
                out.append((str(a.ip), f"{node}.{i.tunnel}"))
    return tuple(out)


def hosts_file(plan: Plan) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{addr}\t{name}" for addr, name in plan.hosts]
    return "\n".join(lines) + "\n"


def route_path(plan: Plan, src: str, dst: str, family: int = 4) -> list[str]:
    """The nodes a packet from `src` to `dst`'s primary address of `family` crosses,
    ends included: from each node, the neighbour on a connected subnet that holds the
    address, else the owner of the gateway of the longest-prefix route to it, as the
    kernel of each node will forward it with the routes planned here. This is the one
    place that says which routers carry a flow (samplers and profiles ask it); it stops
    early, at the last node reached, when a node has no route on."""
    target = plan.node(dst).primary4 if family == 4 else plan.node(dst).primary6
    if target is None:
        return [src, dst] if src != dst else [src]
    owner = {str(a.ip): n.name for n in plan.nodes for i in n.ifaces for a in i.addrs}
    path = [src]
    while path[-1] != dst and len(path) <= len(plan.nodes):
        nxt = _next_hop(plan.node(path[-1]), target, owner)
        if nxt is None or nxt in path:
            break
        path.append(nxt)
    return path


def _next_hop(node: NodePlan, target: IPv4Address | IPv6Address,
              owner: dict[str, str]) -> str | None:
    for i in node.ifaces:
        if i.kind in UNDERLAY and any(target in a.network for a in i.addrs):
            return i.peer
    best: Route | None = None
    for r in node.routes:
        if (r.dst.version == target.version and target in r.dst
                and (best is None or r.dst.prefixlen > best.dst.prefixlen)):
            best = r
    return owner.get(best.gateway) if best is not None else None
