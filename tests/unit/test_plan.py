"""plan_lab, checked without a kernel.

The strongest check is a small router written here: it forwards a packet hop
by hop through the planned interfaces and routes (longest-prefix match over
each node's connected subnets and routes, forwarding only on nodes that have
forwarding on, TTL-bounded) and proves that from every node every address of
every other node is reached, and along a shortest path.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
    ip_address,
    ip_network,
)
from pathlib import Path
from textwrap import dedent

import pytest

from hoplab.errors import SpecError
from hoplab.lab.plan import Iface, Plan, hosts_file, netns_name, plan_lab
from hoplab.lab.where import netns_prefix
from hoplab.spec import load_lab, load_lab_text
from hoplab.spec.model import Lab

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

Addr = IPv4Address | IPv6Address
Net = IPv4Network | IPv6Network
TTL = 255


def lab_of(text: str, name: str | None = None) -> Lab:
    return load_lab_text(dedent(text), "mem.toml", name)


def generated(table: str, extra: str = "") -> Lab:
    return lab_of(f'name = "g"\n{extra}\n[generate]\n{table}\n')


# --- the simulator -------------------------------------------------------------------


class Unreachable(AssertionError):
    pass


@dataclass(frozen=True)
class Delivery:
    owner: str  # the node that accepted the packet
    hops: int  # links crossed
    devs: tuple[tuple[str, str], ...]  # (node, dev) of every hop, in order


class Network:
    """The planned lab as a set of routers joined by point-to-point wires."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.nodes = {n.name: n for n in plan.nodes}
        self.local: dict[str, set[Addr]] = {
            n.name: {a.ip for i in n.ifaces for a in i.addrs} for n in plan.nodes
        }
        self.owner: dict[Addr, str] = {}
        for name, addrs in self.local.items():
            for addr in addrs:
                assert addr not in self.owner, f"{addr} is on {self.owner[addr]} and {name}"
                self.owner[addr] = name
        # (node, dev) -> the interface at the other end of that wire.
        self.wire: dict[tuple[str, str], tuple[str, Iface]] = {}
        self.iface: dict[tuple[str, str], Iface] = {}
        for n in plan.nodes:
            for i in n.ifaces:
                assert (n.name, i.name) not in self.iface, f"{n.name} has two {i.name}"
                self.iface[(n.name, i.name)] = i
                far = [j for j in self.nodes[i.peer].ifaces
                       if j.kind == i.kind and j.peer == n.name and j.link == i.link
                       and j.tunnel == i.tunnel]
                assert len(far) == 1, f"{n.name}/{i.name}: {len(far)} far ends"
                self.wire[(n.name, i.name)] = (i.peer, far[0])
        # WireGuard only carries what the peer's allowed IPs admit.
        self.allowed: dict[tuple[str, str], list[Net]] = {
            (e.node, e.ifname): [ip_network(a) for a in e.allowed] for e in plan.wireguard
        }
        self.table: dict[str, list[tuple[Net, Addr | None, str]]] = {}
        for n in plan.nodes:
            entries: list[tuple[Net, Addr | None, str]] = [
                (a.network, None, i.name) for i in n.ifaces for a in i.addrs]
            for r in n.routes:
                gw = ip_address(r.gateway)
                dev = self.iface.get((n.name, r.dev))
                assert dev is not None, f"{n.name}: route {r} uses unknown device"
                assert r.dst.version == gw.version, f"{n.name}: {r} mixes families"
                assert any(gw in a.network for a in dev.addrs), \
                    f"{n.name}: gateway of {r} is not on-link on {r.dev}"
                assert gw not in self.local[n.name], f"{n.name}: {r} points at itself"
                entries.append((r.dst, gw, r.dev))
            self.table[n.name] = entries
        self._next: dict[tuple[str, Addr], tuple[str, str] | str] = {}
        self._done: dict[tuple[str, Addr], Delivery | str] = {}

    def step(self, node: str, dst: Addr) -> tuple[str, str] | str:
        """(next node, dev) for a packet to dst leaving node, or why it is dropped."""
        key = (node, dst)
        if key in self._next:
            return self._next[key]
        best = -1
        hits: set[tuple[Addr | None, str]] = set()
        for net, gw, dev in self.table[node]:
            if net.version == dst.version and dst in net:
                if net.prefixlen > best:
                    best, hits = net.prefixlen, {(gw, dev)}
                elif net.prefixlen == best:
                    hits.add((gw, dev))
        out: tuple[str, str] | str
        if not hits:
            out = f"{node} has no route to {dst}"
        elif len(hits) > 1:
            out = (f"{node} has {len(hits)} equally specific routes to {dst}: "
                   f"{sorted(map(str, hits))}")
        else:
            gw, dev = next(iter(hits))
            peer, far = self.wire[(node, dev)]
            target = dst if gw is None else gw
            allowed = self.allowed.get((node, dev))
            if target not in {a.ip for a in far.addrs}:
                out = f"{node}: nobody on {dev} has {target} (towards {dst})"
            elif allowed is not None and not any(dst in a for a in allowed
                                                 if a.version == dst.version):
                out = f"{node}: {dst} is outside the allowed IPs of {dev}"
            else:
                out = (peer, dev)
        self._next[key] = out
        return out

    def send(self, src: str, dst: Addr) -> Delivery:
        """Follow dst from src; raise Unreachable with the reason if it is dropped."""
        path: list[tuple[str, str]] = []  # (node, dev) per hop, from src
        at = src
        result: Delivery | str
        while True:
            known = self._done.get((at, dst))
            if known is not None:
                result = known
                break
            if dst in self.local[at]:
                result = Delivery(at, 0, ())
                break
            if at != src and not self.nodes[at].forward:
                result = f"{at} would have to forward to {dst}, but forwarding is off"
                break
            if len(path) >= TTL:
                result = f"TTL exceeded towards {dst}: {[n for n, _ in path[:6]]}..."
                break
            nxt = self.step(at, dst)
            if isinstance(nxt, str):
                result = nxt
                break
            path.append((at, nxt[1]))
            at = nxt[0]
        # Every node on the path shares the same fate (memoised, so big labs stay fast).
        for k in range(len(path) - 1, -1, -1):
            node, dev = path[k]
            if isinstance(result, Delivery):
                result = Delivery(result.owner, result.hops + 1, ((node, dev), *result.devs))
            if k > 0 or self.nodes[node].forward:
                self._done[(node, dst)] = result
        if isinstance(result, str):
            raise Unreachable(f"from {src}: {result}")
        return result


def hop_distances(lab: Lab) -> dict[str, dict[str, int]]:
    adj: dict[str, set[str]] = {n: set() for n in lab.node_names()}
    for link in lab.links:
        adj[link.a].add(link.b)
        adj[link.b].add(link.a)
    out = {}
    for start in adj:
        dist = {start: 0}
        todo = deque([start])
        while todo:
            cur = todo.popleft()
            for nxt in adj[cur]:
                if nxt not in dist:
                    dist[nxt] = dist[cur] + 1
                    todo.append(nxt)
        out[start] = dist
    return out


def assert_all_reach_all(plan: Plan) -> Network:
    """Every node reaches every address of every other node along a shortest path
    (to the address's subnet);
    end-to-end tunnel addresses are reached by the tunnel's other end, in one hop;
    every WireGuard endpoint is reached over the underlay, not through itself."""
    net = Network(plan)
    dist = hop_distances(plan.lab)
    tunnel_of = {a.ip: i for n in plan.nodes for i in n.ifaces if i.kind == "wg-tunnel"
                 for a in i.addrs}
    checked = 0
    for src in plan.nodes:
        for dst in plan.nodes:
            if dst.name == src.name:
                continue
            for iface in dst.ifaces:
                for addr in iface.addrs:
                    if iface.kind == "wg-tunnel" and iface.peer != src.name:
                        continue
                    got = net.send(src.name, addr.ip)
                    assert got.owner == dst.name, f"{src.name} -> {addr.ip} ends on {got.owner}"
                    if addr.ip in tunnel_of:
                        assert got.hops == 1
                        assert net.iface[got.devs[0]].kind == "wg-tunnel"
                    else:
                        # Routes lead to a subnet along a shortest path (to its nearer
                        # end; on a tie, its a side), then at most across that link.
                        to_owner = dist[src.name][dst.name]
                        to_other = dist[src.name][iface.peer]
                        nearest = min(to_owner, to_other)
                        want = [to_owner] if to_owner < to_other else [nearest, nearest + 1]
                        assert got.hops in want, \
                            f"{src.name} -> {dst.name} ({addr.ip}): {got.hops} hops, " \
                            f"the subnet is {nearest} hops away"
                    checked += 1
    for e in plan.wireguard:
        host = ip_address(e.endpoint.rsplit(":", 1)[0].strip("[]"))
        got = net.send(e.node, host)
        assert got.owner == e.peer, f"{e}: the endpoint is on {got.owner}"
        assert all(net.iface[d].kind != "wg-tunnel" for d in got.devs), \
            f"{e}: the underlay path enters an end-to-end tunnel: {got.devs}"
        assert (e.node, e.ifname) not in got.devs, f"{e}: the tunnel would carry itself"
        peer_end = next(x for x in plan.wireguard
                        if x.node == e.peer and x.ifname == e.peer_ifname)
        assert int(e.endpoint.rsplit(":", 1)[1]) == peer_end.listen_port
    assert checked > 0
    return net


# --- the labs ------------------------------------------------------------------------


def chain_example() -> Lab:
    return load_lab(EXAMPLES / "chain.toml")


PARALLEL = """
name = "par"
[nodes.a]
[nodes.b]
[nodes.c]
[nodes.d]
[[links]]
between = ["a", "b"]
[[links]]
between = ["a", "b"]
rate = "10mbit"
[[links]]
between = ["b", "c"]
[[links]]
between = ["c", "b"]
[[links]]
between = ["b", "c"]
wireguard = true
[[links]]
between = ["c", "d"]
[[links]]
between = ["d", "a"]
[[links]]
between = ["d", "a"]
"""

WG_GRID = """
name = "wggrid"
[generate]
grid = [3, 3]
[link_defaults]
wireguard = true
[[tunnels]]
name = "diag"
between = ["r1-1", "r3-3"]
[[tunnels]]
between = ["r1-3", "r3-1"]
"""

def _mesh(seed: int) -> Callable[[], Lab]:
    table = f"mesh = {{ nodes = {10 + 4 * seed}, degree = {2 + seed % 3}, seed = {seed} }}"
    return lambda: generated(table)


LABS: dict[str, Callable[[], Lab]] = {
    "chain.toml": chain_example,
    "chain0": lambda: generated("chain = 0"),
    "chain3": lambda: generated("chain = 3"),
    "chain100": lambda: generated("chain = 100"),
    "star6": lambda: load_lab(EXAMPLES / "star.toml"),
    "grid4x4": lambda: generated("grid = [4, 4]"),
    "grid1x7": lambda: generated("grid = [1, 7]"),
    "wireguard-hops": lambda: load_lab(EXAMPLES / "wireguard-hops.toml"),
    "wg-grid+tunnels": lambda: lab_of(WG_GRID),
    "parallel": lambda: lab_of(PARALLEL),
    "nat": lambda: load_lab(EXAMPLES / "nat.toml"),
    "ipv4-only-mesh": lambda: generated("mesh = { nodes = 15, degree = 2.5, seed = 4 }",
                                        "[addressing]\nipv6 = false"),
    **{f"mesh-seed{seed}": _mesh(seed) for seed in range(6)},
}


@pytest.fixture(params=sorted(LABS), scope="module")
def planned(request: pytest.FixtureRequest) -> Plan:
    return plan_lab(LABS[request.param]())


def test_every_node_reaches_every_address_of_every_other_node(planned: Plan) -> None:
    assert_all_reach_all(planned)


def test_addresses_are_unique_and_links_get_both_families(planned: Plan) -> None:
    lab = planned.lab
    seen: dict[Addr, str] = {}
    for node in planned.nodes:
        for iface in node.ifaces:
            for a in iface.addrs:
                assert a.ip not in seen, f"{a.ip} on {seen[a.ip]} and {node.name}/{iface.name}"
                seen[a.ip] = f"{node.name}/{iface.name}"
    subnets: dict[Net, int] = {}
    for link in lab.links:
        for kind in ("veth", "wg-hop") if link.wireguard else ("veth",):
            ends = [(n, i) for n in planned.nodes for i in n.ifaces
                    if i.link == link.index and i.kind == kind]
            assert sorted(n.name for n, _ in ends) == sorted([link.a, link.b])
            (_, ia), (_, ib) = ends
            want = (4, 6) if lab.addressing.ipv6 else (4,)
            assert tuple(a.version for a in ia.addrs) == want
            assert tuple(a.version for a in ib.addrs) == want
            for x, y in zip(ia.addrs, ib.addrs, strict=True):
                assert x.network == y.network and x.ip != y.ip
                for other, index in subnets.items():
                    assert not x.network.overlaps(other), \
                        f"links[{link.index}] {x.network} overlaps links[{index}] {other}"
                subnets[x.network] = link.index
                pool = {(4, "veth"): lab.addressing.pool4,
                        (6, "veth"): lab.addressing.pool6,
                        (4, "wg-hop"): lab.addressing.tunnel_pool4,
                        (6, "wg-hop"): lab.addressing.tunnel_pool6}[(x.version, kind)]
                assert x.network.subnet_of(pool)  # type: ignore[arg-type]


def test_forwarding_is_on_for_nodes_with_two_or_more_links(planned: Plan) -> None:
    degree = {n: 0 for n in planned.lab.node_names()}
    for link in planned.lab.links:
        degree[link.a] += 1
        degree[link.b] += 1
    for node in planned.nodes:
        assert node.forward == (degree[node.name] >= 2), node.name
        assert node.netns == f"{netns_prefix(planned.lab.name)}{node.name}"


def test_hosts_entries(planned: Plan) -> None:
    names: dict[str, list[str]] = {}
    for addr, line in planned.hosts:
        for name in line.split():
            names.setdefault(name, []).append(addr)
    for node in planned.nodes:
        mine = {str(a.ip) for i in node.ifaces if i.kind == "veth" for a in i.addrs}
        assert node.primary4 is not None and str(node.primary4) in mine
        assert names[f"{node.name}-v4"] == [str(node.primary4)]
        if planned.lab.addressing.ipv6:
            assert node.primary6 is not None and str(node.primary6) in mine
            assert names[f"{node.name}-v6"] == [str(node.primary6)]
            assert names[node.name] == [str(node.primary4), str(node.primary6)]
        else:
            assert node.primary6 is None and f"{node.name}-v6" not in names
            assert names[node.name] == [str(node.primary4)]
        for iface in node.ifaces:
            if iface.kind == "wg-tunnel":
                assert names[f"{node.name}.{iface.tunnel}"] == [str(a.ip) for a in iface.addrs]
    text = hosts_file(planned)
    assert text.startswith("127.0.0.1\tlocalhost\n")
    for addr, line in planned.hosts:
        assert f"{addr}\t{line}\n" in text


# --- specific labs -------------------------------------------------------------------


def test_chain_example_exact_plan() -> None:
    plan = plan_lab(chain_example())
    client, r1, r2, server = plan.nodes
    assert [n.name for n in plan.nodes] == ["client", "r1", "r2", "server"]
    assert [str(a) for a in client.ifaces[0].addrs] == ["10.200.0.1/30", "fd68:6c61:6200::1/64"]
    assert [str(a) for a in server.ifaces[0].addrs] == ["10.200.0.10/30",
                                                        "fd68:6c61:6200:2::2/64"]
    assert [i.name for i in r1.ifaces] == ["eth0", "eth1"]
    assert (client.forward, r1.forward, r2.forward, server.forward) == (False, True, True, False)
    # The rate of links[1] shapes r1's egress (forward) and r2's egress (reverse).
    assert r1.ifaces[1].egress.rate_bps == 100_000_000
    assert r2.ifaces[0].egress.rate_bps == 100_000_000
    assert client.ifaces[0].egress.is_plain()
    assert plan.wireguard == ()
    assert ("10.200.0.10", "server server-v4") in plan.hosts
    assert ("fd68:6c61:6200:2::2", "server server-v6") in plan.hosts
    assert netns_name("chain", "r1") == "hoplab-chain.r1" == r1.netns


def test_wireguard_hops_plan() -> None:
    plan = plan_lab(load_lab(EXAMPLES / "wireguard-hops.toml"))
    r1, r2 = plan.node("r1"), plan.node("r2")
    assert [(i.name, i.kind) for i in r1.ifaces] == [("eth0", "veth"), ("eth1", "veth"),
                                                      ("wg1", "wg-hop")]
    # Router-to-router traffic is routed into the hop tunnel, never over the bare veth.
    assert {r.dev for r in r1.routes} == {"wg1"}
    assert {r.dev for r in r2.routes} <= {"wg0", "wg1"}
    ends = {(e.node, e.ifname): e for e in plan.wireguard}
    assert set(ends) == {("r1", "wg1"), ("r2", "wg0"), ("r2", "wg1"), ("r3", "wg0"),
                         ("client", "wg-exit"), ("server", "wg-exit")}
    assert ends[("r1", "wg1")].endpoint == f"{r2.ifaces[0].addrs[0].ip}:51821"
    assert ends[("r1", "wg1")].listen_port == ends[("r2", "wg0")].listen_port
    ports = {e.listen_port for e in plan.wireguard}
    assert len(ports) == 3  # one per hop, one per end-to-end tunnel
    exit_c, exit_s = ends[("client", "wg-exit")], ends[("server", "wg-exit")]
    assert exit_c.endpoint == f"{plan.node('server').primary4}:{exit_s.listen_port}"
    assert exit_s.endpoint == f"{plan.node('client').primary4}:{exit_c.listen_port}"
    tunnel_net = {a.network for i in plan.node("client").ifaces if i.kind == "wg-tunnel"
                  for a in i.addrs}
    assert {ip_network(a) for a in exit_c.allowed} == tunnel_net
    assert {ip_network(a) for a in exit_s.allowed} == tunnel_net
    names = dict((line, addr) for addr, line in plan.hosts if "." in line and ":" not in addr)
    assert set(names) == {"client.exit", "server.exit"}


def test_explicit_subnets_and_addresses_are_used() -> None:
    lab = lab_of("""
        name = "explicit"
        [nodes.a]
        [nodes.b]
        [nodes.c]
        [nodes.d]
        [[links]]
        between = ["a", "b"]
        subnet4 = "192.168.50.0/24"
        subnet6 = "fd00:50::/64"
        [[links]]
        between = ["b", "c"]
        addresses = ["172.16.9.9/29", "fd00:9::9/112", "172.16.9.10/29", "fd00:9::a/112"]
        [[links]]
        between = ["c", "d"]
        subnet4 = "10.200.0.0/30"
        [[links]]
        between = ["d", "a"]
        subnet4 = "10.77.0.0/31"
        subnet6 = "fd00:77::/127"
    """)
    plan = plan_lab(lab)

    def addrs(node: str, dev: str) -> list[str]:
        iface = next(i for i in plan.node(node).ifaces if i.name == dev)
        return [str(a) for a in iface.addrs]

    assert addrs("a", "eth0") == ["192.168.50.1/24", "fd00:50::1/64"]
    assert addrs("b", "eth0") == ["192.168.50.2/24", "fd00:50::2/64"]
    assert addrs("b", "eth1") == ["172.16.9.9/29", "fd00:9::9/112"]
    assert addrs("c", "eth0") == ["172.16.9.10/29", "fd00:9::a/112"]
    assert addrs("c", "eth1")[0] == "10.200.0.1/30"
    assert addrs("d", "eth0")[0] == "10.200.0.2/30"
    # /31 and /127 are point-to-point: both addresses are hosts.
    assert addrs("d", "eth1") == ["10.77.0.0/31", "fd00:77::/127"]
    assert addrs("a", "eth1") == ["10.77.0.1/31", "fd00:77::1/127"]
    # Automatic subnets skip the explicit 10.200.0.0/30: links[2] has only IPv6 from the pool.
    assert addrs("c", "eth1")[1] == "fd68:6c61:6200::1/64"
    assert_all_reach_all(plan)


def test_automatic_subnets_avoid_explicit_ones_in_the_pool() -> None:
    lab = lab_of("""
        name = "avoid"
        [nodes.a]
        [nodes.b]
        [nodes.c]
        [nodes.d]
        [[links]]
        between = ["a", "b"]
        [[links]]
        between = ["b", "c"]
        subnet4 = "10.200.0.0/29"
        addresses = ["10.200.0.3/29", "10.200.0.4/29"]
        [[links]]
        between = ["c", "d"]
        subnet6 = "fd68:6c61:6200::/64"
    """)
    plan = plan_lab(lab)
    assert_all_reach_all(plan)
    a, c = plan.node("a"), plan.node("c")
    assert str(c.ifaces[0].addrs[0]) == "10.200.0.4/29"
    assert not a.ifaces[0].addrs[0].network.overlaps(IPv4Network("10.200.0.0/29"))
    assert not any(str(x.network) == "fd68:6c61:6200::/64" for x in a.ifaces[0].addrs)


def test_custom_pools() -> None:
    lab = generated("chain = 4", '[addressing]\npool4 = "10.50.0.0/24"\npool6 = "fd00:50::/56"')
    plan = plan_lab(lab)
    for node in plan.nodes:
        for iface in node.ifaces:
            v4, v6 = iface.addrs
            assert isinstance(v4, IPv4Interface) and v4 in IPv4Network("10.50.0.0/24")
            assert isinstance(v6, IPv6Interface) and v6 in IPv6Network("fd00:50::/56")
    assert_all_reach_all(plan)


def test_pool_too_small_is_a_spec_error() -> None:
    lab = generated("chain = 3", '[addressing]\npool4 = "10.50.0.0/29"')
    with pytest.raises(SpecError, match="too small"):
        plan_lab(lab)


def test_explicit_forward_false_is_kept() -> None:
    lab = lab_of("""
        name = "nofwd"
        [nodes.a]
        [nodes.b]
        forward = false
        [nodes.c]
        forward = true
        [[links]]
        between = ["a", "b"]
        [[links]]
        between = ["b", "c"]
    """)
    plan = plan_lab(lab)
    assert [n.forward for n in plan.nodes] == [False, False, True]
    net = Network(plan)
    c_addr = plan.node("c").ifaces[0].addrs[0].ip
    with pytest.raises(Unreachable, match="forwarding is off"):
        net.send("a", c_addr)


def test_the_simulator_catches_a_missing_route() -> None:
    """The checker itself must be able to fail."""
    plan = plan_lab(chain_example())
    client = plan.node("client")
    broken = Plan(plan.lab, tuple(n if n.name != "client" else
                                  type(n)(n.name, n.netns, n.forward, n.ifaces, n.routes[1:],
                                          n.primary4, n.primary6)
                                  for n in plan.nodes), plan.wireguard, plan.hosts)
    assert client.routes
    with pytest.raises(AssertionError):
        assert_all_reach_all(broken)


def test_duplicate_explicit_subnets_are_refused() -> None:
    """Two links given the same subnet would put the same address on two nodes
    (10.9.0.1 on a and on b); the loader or the planner must refuse it."""
    text = dedent("""
        name = "dup"
        [nodes.a]
        [nodes.b]
        [nodes.c]
        [[links]]
        between = ["a", "b"]
        subnet4 = "10.9.0.0/30"
        [[links]]
        between = ["b", "c"]
        subnet4 = "10.9.0.0/30"
    """)
    with pytest.raises(SpecError, match=r"links\[1\]"):
        plan_lab(load_lab_text(text, "mem.toml"))


# --- random labs ---------------------------------------------------------------------


def random_lab_text(seed: int) -> str:
    """A connected random multigraph with parallel links, per-hop WireGuard, an
    end-to-end tunnel and a few explicit subnets."""
    rng = random.Random(seed)
    n = rng.randint(3, 14)
    names = [f"n{i}" for i in range(n)]
    pairs = [(names[i], names[rng.randrange(i)]) for i in range(1, n)]  # a spanning tree
    for _ in range(rng.randint(0, 2 * n)):
        a, b = rng.sample(names, 2)
        pairs.append((a, b))
        if rng.random() < 0.2:
            pairs.append((b, a))  # parallel
    rng.shuffle(pairs)
    lines = [f'name = "rnd{seed}"'] + [f"[nodes.{x}]" for x in names]
    for k, (a, b) in enumerate(pairs):
        lines += ["[[links]]", f'between = ["{a}", "{b}"]']
        if rng.random() < 0.25:
            lines.append("wireguard = true")
        if rng.random() < 0.1:
            lines.append(f'subnet4 = "172.20.{k}.0/24"')
    a, b = rng.sample(names, 2)
    lines += ["[[tunnels]]", f'between = ["{a}", "{b}"]']
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(12))
def test_random_labs(seed: int) -> None:
    plan = plan_lab(load_lab_text(random_lab_text(seed), "rnd.toml"))
    assert_all_reach_all(plan)


# --- size ------------------------------------------------------------------------------


def test_a_1000_node_chain_needs_few_routes_per_node() -> None:
    lab = generated("chain = 998")
    assert len(lab.nodes) == 1000
    plan = plan_lab(lab)
    most = max(len(n.routes) for n in plan.nodes)
    assert most <= 64, most
    assert sum(len(n.routes) for n in plan.nodes) <= 64 * 1000
    # Spot-check reachability end to end and from the middle: 999 hops are beyond
    # any TTL, so only the next-hop decisions are followed here.
    net = Network(plan)
    server = plan.node("server")
    for dst in (server.primary4, server.primary6, plan.node("r500").primary4):
        assert dst is not None
        at, hops = "client", 0
        while dst not in net.local[at]:
            nxt = net.step(at, dst)
            assert not isinstance(nxt, str), nxt
            at, hops = nxt[0], hops + 1
            assert hops < 1000
        assert at == net.owner[dst]


def test_a_grid_keeps_its_rows_together_in_few_routes() -> None:
    # Without the tie-break toward the previous subnet's next hop this grid needed
    # 518 routes on its busiest node (299,492 in all).
    plan = plan_lab(generated("grid = [25, 40]"))
    assert max(len(n.routes) for n in plan.nodes) <= 120
    assert sum(len(n.routes) for n in plan.nodes) <= 80_000
    assert_all_reach_all(plan_lab(generated("grid = [6, 7]")))


# --- the path a flow takes -------------------------------------------------------------


@pytest.mark.parametrize("example", ["star", "grid", "mesh", "wireguard-hops", "chain5"])
@pytest.mark.parametrize("family", [4, 6])
def test_path_is_the_walk_of_the_planned_routes(example: str, family: int) -> None:
    """plan.path (what samplers and profiles watch) is, for every ordered pair, the hop
    sequence the simulator above finds by longest-prefix match in each node's routes."""
    plan = plan_lab(load_lab(EXAMPLES / f"{example}.toml"))
    net = Network(plan)
    for src in plan.nodes:
        for dst in plan.nodes:
            if src is dst:
                continue
            addr = dst.primary4 if family == 4 else dst.primary6
            assert addr is not None
            got = net.send(src.name, addr)
            walked = [node for node, _ in got.devs] + [got.owner]
            assert plan.path(src.name, dst.name, family) == walked, (src.name, dst.name)


def test_spokes_of_a_star_talk_through_the_hub_despite_a_shortcut() -> None:
    # A node's address is on its first link (to the hub); the h1-h2 shortcut is not the
    # way to it, though a breadth-first search over the links would take it.
    plan = plan_lab(load_lab(EXAMPLES / "star.toml"))
    assert plan.path("h1", "h2") == ["h1", "hub", "h2"]
    assert plan.path("h2", "h1", 6) == ["h2", "hub", "h1"]
    assert plan.path("h1", "hub") == ["h1", "hub"]
