from __future__ import annotations

import tomllib
from collections.abc import Callable
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network
from pathlib import Path
from textwrap import dedent

import pytest

from hoplab.errors import SpecError
from hoplab.spec import load_lab, load_lab_text
from hoplab.spec.loader import key_name
from hoplab.spec.model import Addressing, Direction, Lab, Nat, Node, QueueLimit, Tunnel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

HEAD = 'name = "t"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n'


ErrorOf = Callable[[str], str]


@pytest.fixture
def error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ErrorOf:
    """Write `text` to lab.toml, load it, and return the one-line error it gives."""
    monkeypatch.chdir(tmp_path)

    def run(text: str) -> str:
        Path("lab.toml").write_text(dedent(text))
        with pytest.raises(SpecError) as err:
            load_lab("lab.toml")
        return str(err.value)

    return run


def lab(text: str, name: str | None = None) -> Lab:
    return load_lab_text(dedent(text), "mem.toml", name)


# --- examples -------------------------------------------------------------------------


def _lab_files() -> list[Path]:
    """Example lab files; experiment files (they name a lab) are tested elsewhere."""
    return [p for p in sorted(EXAMPLES.glob("*.toml"))
            if "lab" not in tomllib.loads(p.read_text())]


@pytest.mark.parametrize("path", _lab_files(), ids=lambda p: p.name)
def test_examples_load(path: Path) -> None:
    loaded = load_lab(path)
    assert loaded.name == path.stem
    assert loaded.source == str(path)
    assert path.read_text().startswith("#") or path.name == "chain.toml"


def test_chain_example() -> None:
    chain = load_lab(EXAMPLES / "chain.toml")
    assert chain.node_names() == ("client", "r1", "r2", "server")
    assert [(k.index, k.a, k.b) for k in chain.links] == [
        (0, "client", "r1"), (1, "r1", "r2"), (2, "r2", "server")]
    assert chain.links[0].forward == Direction()
    assert chain.links[1].forward == chain.links[1].reverse == Direction(rate_bps=100_000_000)
    assert chain.tunnels == ()
    assert chain.addressing == Addressing()


def test_generated_examples() -> None:
    chain5 = load_lab(EXAMPLES / "chain5.toml")
    assert chain5.node_names() == ("client", "r1", "r2", "r3", "r4", "r5", "server")
    assert all(k.forward.rate_bps == k.reverse.rate_bps == 200_000_000 for k in chain5.links)
    assert len(load_lab(EXAMPLES / "grid.toml").links) == 12
    mesh = load_lab(EXAMPLES / "mesh.toml")
    assert len(mesh.nodes) == 12
    assert len(mesh.links) == 18


def test_wireguard_and_nat_examples() -> None:
    wg = load_lab(EXAMPLES / "wireguard-hops.toml")
    assert [k.wireguard for k in wg.links] == [False, True, True, False]
    assert wg.tunnels == (Tunnel(name="exit", a="client", b="server"),)
    nat = load_lab(EXAMPLES / "nat.toml")
    assert nat.node("r1").nat == Nat(out="server")


# --- building -------------------------------------------------------------------------


def test_defaults_directions_and_precedence() -> None:
    got = lab(HEAD + '''
        [link_defaults]
        rate = "10mbit"
        delay = "5ms"
        emulator = "netem"
        reverse = { rate = "1mbit", loss = 2 }

        [[links]]
        between = ["a", "b"]

        [[links]]
        between = ["b", "c"]
        rate = "100mbit"
        queue = "64kb"
        mtu = 9000
        wireguard = true
        forward = { jitter = "1ms", qdisc = "fq_codel" }
    ''')
    ab, bc = got.links
    assert ab.forward == Direction(rate_bps=10_000_000, delay_s=0.005)
    assert ab.reverse == Direction(rate_bps=1_000_000, delay_s=0.005, loss_pct=2.0)
    assert (ab.emulator, ab.mtu, ab.wireguard) == ("netem", None, False)
    # The link's own rate beats even the per-direction default.
    assert bc.forward == Direction(rate_bps=100_000_000, delay_s=0.005, jitter_s=0.001,
                                   queue=QueueLimit(bytes=64_000), qdisc="fq_codel")
    assert bc.reverse == Direction(rate_bps=100_000_000, delay_s=0.005, loss_pct=2.0,
                                   queue=QueueLimit(bytes=64_000))
    assert (bc.emulator, bc.mtu, bc.wireguard) == ("netem", 9000, True)


def test_generated_then_explicit() -> None:
    got = lab('''
        name = "g"
        [generate]
        chain = 1
        [link_defaults]
        delay = "1ms"
        [nodes.r1]
        forward = true
        [nodes.extra]
        [[links]]
        between = ["r1", "extra"]
        [[links]]
        between = ["r1", "extra"]
    ''')
    assert got.node_names() == ("client", "r1", "server", "extra")
    assert got.node("r1").forward is True
    assert got.node("client") == Node(name="client")
    # Parallel links are fine; indexes count generated links first.
    assert [(k.index, k.a, k.b) for k in got.links] == [
        (0, "client", "r1"), (1, "r1", "server"), (2, "r1", "extra"), (3, "r1", "extra")]
    assert all(k.forward.delay_s == 0.001 for k in got.links)


def test_node_options() -> None:
    got = lab('''
        name = "n"
        [nodes.r1]
        forward = false
        sysctls.'net.ipv4.ip_forward' = true
        sysctls."net.core.rmem_max" = 4194304
        sysctls."net/ipv4/tcp_congestion_control" = "bbr"
        offloads = { gro = false, tso = true }
        setup = ["tc qdisc show dev 'r1 eth0'", ["sh", "-c", "echo hi"]]
        teardown = ["true"]
    ''')
    assert got.node("r1") == Node(
        name="r1",
        forward=False,
        sysctls=(("net.ipv4.ip_forward", "1"), ("net.core.rmem_max", "4194304"),
                 ("net/ipv4/tcp_congestion_control", "bbr")),
        offloads=(("gro", False), ("tso", True)),
        setup=(("tc", "qdisc", "show", "dev", "r1 eth0"), ("sh", "-c", "echo hi")),
        teardown=(("true",),),
    )


def test_addresses_and_subnets() -> None:
    got = lab(HEAD + '''
        [[links]]
        between = ["a", "b"]
        subnet4 = "10.9.0.0/30"
        subnet6 = "fd00:9::/64"
        addresses = ["10.9.0.1/30", "fd00:9::a/64", "10.9.0.2/30", "fd00:9::b/64"]
        [[links]]
        between = ["b", "c"]
        addresses = ["fd00:1::1/64", "fd00:1::2/64"]
    ''')
    first, second = got.links
    assert first.subnet4 == IPv4Network("10.9.0.0/30")
    assert first.subnet6 == IPv6Network("fd00:9::/64")
    assert (first.addr_a4, first.addr_b4) == (IPv4Interface("10.9.0.1/30"),
                                              IPv4Interface("10.9.0.2/30"))
    assert (first.addr_a6, first.addr_b6) == (IPv6Interface("fd00:9::a/64"),
                                              IPv6Interface("fd00:9::b/64"))
    assert (second.addr_a4, second.addr_a6) == (None, IPv6Interface("fd00:1::1/64"))


def test_tunnels_and_addressing() -> None:
    got = lab(HEAD + '''
        [[links]]
        between = ["a", "b"]
        [[links]]
        between = ["b", "c"]
        [[tunnels]]
        between = ["a", "c"]
        [[tunnels]]
        name = "exit"
        between = ["c", "a"]
        subnet4 = "10.99.0.0/30"
        [addressing]
        pool4 = "10.50.0.0/16"
        tunnel_pool6 = "fd99::/48"
        ipv6 = false
    ''')
    assert got.tunnels == (
        Tunnel(name="wg0", a="a", b="c"),
        Tunnel(name="exit", a="c", b="a", subnet4=IPv4Network("10.99.0.0/30")),
    )
    assert got.addressing == Addressing(pool4=IPv4Network("10.50.0.0/16"),
                                        tunnel_pool6=IPv6Network("fd99::/48"), ipv6=False)


def test_name_override() -> None:
    assert lab(HEAD, name="other").name == "other"
    assert lab(HEAD.replace('name = "t"\n', ""), name="given").name == "given"


def test_key_name() -> None:
    assert key_name(("links", 2, "rate")) == "links[2].rate"
    assert key_name(("nodes", "r1", "nat", "out")) == "nodes.r1.nat.out"
    assert key_name(("nodes", "r1", "sysctls", "net.ipv4.x")) == 'nodes.r1.sysctls."net.ipv4.x"'
    assert key_name(("generate", "grid", 1)) == "generate.grid[1]"


# --- errors: exact messages and lines ---------------------------------------------------


def test_unknown_link_key(error: ErrorOf) -> None:
    msg = error('''\
        name = "t"
        [nodes.a]
        [nodes.b]
        [[links]]
        between = ["a", "b"]
        [[links]]
        rat = "1mbit"
        between = ["a", "b"]
    ''')
    assert msg == (
        "lab.toml:7: links[1].rat: unknown key (did you mean 'rate'?); allowed keys: between, "
        "rate, pps, delay, jitter, loss, loss_burst, duplicate, reorder, trace, queue, qdisc, "
        "qdisc_options, emulator, wireguard, mtu, forward, reverse, subnet4, subnet6, "
        "addresses, attach"
    )


def test_mbps_is_refused_with_line(error: ErrorOf) -> None:
    msg = error('''\
        name = "t"
        [nodes.a]
        [nodes.b]

        [[links]]
        between = ["a", "b"]
        # slow uplink
        rate = "100mbps"
    ''')
    assert msg.startswith("lab.toml:8: links[0].rate: '100mbps' is ambiguous")
    assert "write bits, e.g. '100mbit'" in msg


def test_duplicate_node(error: ErrorOf) -> None:
    msg = error('name = "t"\n[nodes.a]\n[nodes.b]\nforward = true\n\n[nodes.a]\n')
    assert msg == "lab.toml:6: nodes.a: duplicate node 'a': [nodes.a] is already declared above"


def test_syntax_error(error: ErrorOf) -> None:
    msg = error('name = "t"\n[nodes.a]\nforward = yes\n')
    assert msg.startswith("lab.toml:3: TOML syntax error: ")
    assert "(at line" not in msg


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read the lab file"):
        load_lab(tmp_path / "missing.toml")


def test_first_error_wins(error: ErrorOf) -> None:
    msg = error('name = "t"\n[nodes.a]\nfoo = 1\n[nodes.b]\nbar = 2\n')
    assert msg.startswith("lab.toml:3: nodes.a.foo: unknown key; allowed keys: forward,")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('[[links]]\nbetween = ["a", "x"]\n',
         "lab.toml:6: links[0].between: unknown node 'x'"),
        ('[[links]]\nbetween = ["a", "bb"]\n',
         "lab.toml:6: links[0].between: unknown node 'bb' (did you mean 'b'?)"),
        ('[[links]]\nbetween = ["a", "a"]\n',
         "lab.toml:6: links[0].between: needs two different nodes, got 'a' twice"),
        ('[[links]]\nbetween = ["a"]\n',
         "lab.toml:6: links[0].between: expected two node names like"),
        ('[[links]]\nrate = "1mbit"\n',
         'lab.toml:5: links[0]: missing required key "between"'),
        ('[[links]]\nbetween = ["a", "b"]\njitter = "2ms"\n',
         "lab.toml:7: links[0].jitter: jitter needs a delay on the same direction "
         "(forward, a -> b)"),
        ('[[links]]\nbetween = ["a", "b"]\nloss = "120%"\n',
         "lab.toml:7: links[0].loss: a percentage must be between 0 and 100"),
        ('[[links]]\nbetween = ["a", "b"]\nqdisc = "red"\n',
         "lab.toml:7: links[0].qdisc: 'red' is not one of fifo, htb,"),
        ('[[links]]\nbetween = ["a", "b"]\nemulator = "ns3"\n',
         "lab.toml:7: links[0].emulator: 'ns3' is not one of auto, netem, wire"),
        ('[[links]]\nbetween = ["a", "b"]\nmtu = 100\n',
         "lab.toml:7: links[0].mtu: an MTU must be between 576 and 65535, got 100"),
        ('[[links]]\nbetween = ["a", "b"]\nwireguard = "yes"\n',
         "lab.toml:7: links[0].wireguard: expected true or false, got a string ('yes')"),
        ('[[links]]\nbetween = ["a", "b"]\nforward = { mtu = 1400 }\n',
         "lab.toml:7: links[0].forward.mtu: unknown key; allowed keys: rate, delay, jitter,"),
        ('[[links]]\nbetween = ["a", "b"]\nsubnet4 = "10.9.0.1/30"\n',
         "lab.toml:7: links[0].subnet4: '10.9.0.1/30' is not an IPv4 network in CIDR form: "
         "10.9.0.1/30 has host bits set"),
        ('[[links]]\nbetween = ["a", "b"]\nsubnet4 = "10.9.0.1/32"\n',
         "lab.toml:7: links[0].subnet4: 10.9.0.1/32 has no room for two hosts; use /31 or"),
        ('[[links]]\nbetween = ["a", "b"]\nsubnet6 = "fd00::1/128"\n',
         "lab.toml:7: links[0].subnet6: fd00::1/128 has no room for two hosts; use /127 or"),
        ('[[links]]\nbetween = ["a", "b"]\nsubnet6 = "10.9.0.0/30"\n',
         "lab.toml:7: links[0].subnet6: '10.9.0.0/30' is not an IPv6 network"),
        ('[[links]]\nbetween = ["a", "b"]\naddresses = ["10.9.0.1/30", "10.9.1.2/30"]\n',
         "lab.toml:7: links[0].addresses[1]: 10.9.1.2/30 must be a different address in the "
         "same subnet as 10.9.0.1/30"),
        ('[[links]]\nbetween = ["a", "b"]\naddresses = ["10.9.0.1/30"]\n',
         "lab.toml:7: links[0].addresses: list exactly two IPv4 addresses"),
        ('[[links]]\nbetween = ["a", "b"]\naddresses = ["10.9.0.1", "10.9.0.2"]\n',
         "lab.toml:7: links[0].addresses[0]: '10.9.0.1' needs a prefix length"),
        ('[[links]]\nbetween = ["a", "b"]\naddresses = ["10.9.0.0/30", "10.9.0.1/30"]\n',
         "lab.toml:7: links[0].addresses[0]: 10.9.0.0 is the network or broadcast address"),
        ('[[links]]\nbetween = ["a", "b"]\nsubnet4 = "10.8.0.0/30"\n'
         'addresses = ["10.9.0.1/30", "10.9.0.2/30"]\n',
         "lab.toml:8: links[0].addresses[0]: 10.9.0.1/30 is not in subnet4 = 10.8.0.0/30"),
        ('[link_defaults]\njitter = "1ms"\n[[links]]\nbetween = ["a", "b"]\n',
         "lab.toml:6: link_defaults.jitter: jitter needs a delay"),
        ('[link_defaults]\nbetween = ["a", "b"]\n',
         "lab.toml:6: link_defaults.between: unknown key; allowed keys: rate,"),
        ('[nodes.d]\nnat = { out = "c" }\n[[links]]\nbetween = ["a", "d"]\n',
         "lab.toml:6: nodes.d.nat.out: node 'c' is not a neighbour of 'd'"),
        ('[nodes.d]\nnat = { out = "a very/bad name" }\n',
         "lab.toml:6: nodes.d.nat.out: 'a very/bad name' is neither a node nor a valid"),
        ('[nodes.d]\nnat = { via = "a" }\n',
         "lab.toml:6: nodes.d.nat.via: unknown key; allowed keys: out"),
        ('[nodes.d]\nsysctls = { "net..ipv4" = 1 }\n',
         'lab.toml:6: nodes.d.sysctls."net..ipv4": not a sysctl name'),
        ('[nodes.d]\nsysctls = { "kernel.core_pattern" = "|/tmp/x" }\n',
         'lab.toml:6: nodes.d.sysctls."kernel.core_pattern": only net.* sysctls can be set'),
        ('[nodes.d]\nsysctls = { "vm/overcommit_memory" = 1 }\n',
         'lab.toml:6: nodes.d.sysctls."vm/overcommit_memory": only net.* sysctls'),
        ('[nodes.d]\nsysctls = { "network.x" = 1 }\n',
         'lab.toml:6: nodes.d.sysctls."network.x": only net.* sysctls'),
        ('[nodes.d]\nsysctls = { "net.x" = 1.5 }\n',
         'lab.toml:6: nodes.d.sysctls."net.x": a sysctl value is a string, integer or boolean'),
        ('[nodes.d]\noffloads = { gro = false, turbo = true }\n',
         "lab.toml:6: nodes.d.offloads.turbo: unknown key; allowed keys: gro, gso,"),
        ('[nodes.d]\nsetup = [\n  "ip a",\n  "",\n]\n',
         "lab.toml:8: nodes.d.setup[1]: empty command"),
        ('[nodes.d]\nsetup = "ip a"\n',
         "lab.toml:6: nodes.d.setup: expected an array, got a string ('ip a')"),
        ('[nodes."9lives"]\n', "lab.toml:5: nodes.9lives: invalid node name '9lives'"),
        ('[[tunnels]]\nbetween = ["a", "b"]\n',
         "lab.toml:6: tunnels[0].between: no path of links joins 'a' and 'b'"),
        ('[[links]]\nbetween = ["a", "b"]\n[[tunnels]]\nname = "Exit"\nbetween = ["a", "b"]\n',
         "lab.toml:8: tunnels[0].name: 'Exit' is not 1 to 8 lowercase letters or digits"),
        ('[[links]]\nbetween = ["a", "b"]\n[[tunnels]]\nbetween = ["a", "b"]\n'
         '[[tunnels]]\nname = "wg0"\nbetween = ["b", "a"]\n',
         "lab.toml:10: tunnels[1].name: a tunnel named 'wg0' is already defined"),
        ('[[links]]\nbetween = ["a", "b"]\n[[tunnels]]\nbetween = ["a", "b"]\ntype = "ipsec"\n',
         "lab.toml:9: tunnels[0].type: 'ipsec' is not one of wireguard"),
        ('[addressing]\npool4 = "fd00::/48"\n',
         "lab.toml:6: addressing.pool4: 'fd00::/48' is not an IPv4 network"),
        ('[addressing]\ntunnel_pool4 = "10.200.128.0/24"\n',
         "lab.toml:6: addressing.tunnel_pool4: 10.200.0.0/16 and 10.200.128.0/24 overlap"),
        ('[addressing]\nipv6 = false\n[[links]]\nbetween = ["a", "b"]\nsubnet6 = "fd00::/64"\n',
         "lab.toml:9: links[0].subnet6: IPv6 is disabled in [addressing] (ipv6 = false)"),
        ('[addressing]\nipv6 = false\n[[links]]\nbetween = ["a", "b"]\n'
         'addresses = ["fd00::1/64", "fd00::2/64"]\n',
         "lab.toml:9: links[0].addresses[0]: IPv6 is disabled"),
        ('[generate]\nchain = -1\n', "lab.toml:6: generate.chain: a chain needs 0 or more"),
        ('[generate]\ngrid = [3, 0]\n', "lab.toml:6: generate.grid[1]: a grid needs at least 1"),
        ('[generate]\nmesh = { nodes = 5, degre = 2 }\n',
         "lab.toml:6: generate.mesh.degre: unknown key (did you mean 'degree'?)"),
        ('[generate]\nmesh = { nodes = 5, degree = 7 }\n',
         "lab.toml:6: generate.mesh.degree: the average degree of 5 nodes is at most 4"),
        ('[generate]\nchain = 1\nstar = 2\n',
         "lab.toml:7: generate.star: only one generator per file, and 'chain' comes first"),
    ],
)
def test_errors(error: ErrorOf, body: str, expected: str) -> None:
    assert error(HEAD + body).startswith(expected)


def test_jitter_with_delay_from_link_base() -> None:
    got = lab(HEAD + '[[links]]\nbetween = ["a", "b"]\ndelay = "4ms"\n'
                     'forward = { jitter = "1ms" }\n')
    assert got.links[0].forward == Direction(delay_s=0.004, jitter_s=0.001)
    assert got.links[0].reverse == Direction(delay_s=0.004)


def test_two_generators(error: ErrorOf) -> None:
    msg = error('name = "t"\n[generate]\nchain = 1\nmesh = { nodes = 3 }\n')
    assert msg == "lab.toml:4: generate.mesh: only one generator per file, and 'chain' comes first"


def test_reverse_jitter_without_delay(error: ErrorOf) -> None:
    msg = error(HEAD + '[[links]]\nbetween = ["a", "b"]\nforward = { delay = "5ms" }\n'
                       'reverse = { jitter = "1ms" }\n')
    assert msg.startswith("lab.toml:8: links[0].reverse.jitter: jitter needs a delay on the "
                          "same direction (reverse, b -> a)")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[nodes.a]\n", "lab.toml: name: missing required key"),
        ('name = "x"\nnodez = 1\n',
         "lab.toml:2: nodez: unknown key (did you mean 'nodes'?); allowed keys: name, nodes,"),
        ('name = "Big Lab"\n[nodes.a]\n', "lab.toml:1: name: invalid lab name 'Big Lab'"),
        ('name = "abcdefghijklmnopqrstu"\n[nodes.a]\n', "lab.toml:1: name: invalid lab name"),
        ('name = 5\n[nodes.a]\n', "lab.toml:1: name: expected a string, got an integer (5)"),
        ('name = "empty"\n', "lab.toml: nodes: a lab needs at least one node"),
        ('name = "x"\nnodes = []\n', "lab.toml:2: nodes: expected a table, got an array"),
        ('name = "x"\n[nodes.a]\n[links]\n', "lab.toml:3: links: expected an array, got a table"),
    ],
)
def test_top_level_errors(error: ErrorOf, text: str, expected: str) -> None:
    assert error(text).startswith(expected)


def test_bad_name_override() -> None:
    with pytest.raises(SpecError) as err:
        lab(HEAD, name="No Good")
    assert str(err.value).startswith("mem.toml: name: invalid lab name 'No Good'")
    assert err.value.line is None
    assert err.value.key == "name"


def test_error_attributes() -> None:
    with pytest.raises(SpecError) as err:
        lab(HEAD + '[[links]]\nbetween = ["a", "b"]\nrate = "fast"\n')
    assert (err.value.file, err.value.line, err.value.key) == ("mem.toml", 7, "links[0].rate")


def test_point_to_point_subnets() -> None:
    got = lab(HEAD + '[[links]]\nbetween = ["a", "b"]\nsubnet4 = "10.9.0.0/31"\n'
                     'subnet6 = "fd00::/127"\naddresses = ["10.9.0.0/31", "10.9.0.1/31"]\n')
    assert got.links[0].subnet4 == IPv4Network("10.9.0.0/31")
    assert got.links[0].subnet6 == IPv6Network("fd00::/127")
    assert got.links[0].addr_a4 == IPv4Interface("10.9.0.0/31")


def test_overlapping_explicit_subnets_name_the_later_link_and_its_line() -> None:
    text = (
        'name = "o"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n'
        '[[links]]\nbetween = ["a", "b"]\nsubnet4 = "10.9.0.0/30"\n'
        '[[links]]\nbetween = ["b", "c"]\naddresses = ["10.9.0.1/29", "10.9.0.2/29"]\n'
    )
    with pytest.raises(SpecError) as err:
        load_lab_text(text, "o.toml")
    assert str(err.value) == ("o.toml:10: links[1].addresses: 10.9.0.0/29 overlaps "
                              "10.9.0.0/30 of links[0]")
