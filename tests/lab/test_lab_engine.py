"""The lab engine against the real kernel: reachability, shaping, NAT, WireGuard,
generators, the CLI, bad input, crash safety and `hoplab clean`."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hoplab.lab.caps import probe
from hoplab.lab.clean import in_use
from hoplab.lab.state import ETC_NETNS, LABS_DIR, all_states
from hoplab.lab.where import netns_prefix
from tests.helpers.devices import PREFIX as FARM_PREFIX
from tests.helpers.lab import (
    EXAMPLES,
    HOPLAB,
    KERNEL_SHAPER_CC,
    LabUp,
    UpLab,
    foreign_labs,
    hoplab,
    iperf3,
    lab_namespaces,
    link_stats,
    live_pids,
    namespaces,
    payload_mbit,
    pids_in,
    root_links,
    run_in,
    steady_goodput,
    stop,
    wait_listening,
)

pytestmark = pytest.mark.root

# A shaped TCP flow's steady seconds against the payload rate: +-0.5 % (a header slip,
# 1448/1500, is 0.9 % off; a 1000/1024 one 2.4 %).
RATE_TOLERANCE = 0.005


def ping(up: UpLab, node: str, target: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return up.run(node, "ping", "-c1", "-W2", *extra, target)


def assert_pings(up: UpLab, node: str, target: str, *extra: str) -> str:
    proc = ping(up, node, target, *extra)
    assert proc.returncode == 0, f"{node} -> {target}: {proc.stdout}{proc.stderr}"
    return proc.stdout


PING_ALL = """
failed=""
for target in "$@"; do
    ping -c1 -W2 "$target" >/dev/null 2>&1 || failed="$failed $target"
done
echo $failed
"""


def unreachable(up: UpLab, node: str, targets: list[str]) -> list[str]:
    """Targets that `ping -c1 -W2` from node does not reach (one `ip netns exec`)."""
    assert targets
    proc = up.run(node, "sh", "-c", PING_ALL, "sh", *targets, timeout=10 + 3 * len(targets))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


# Other labs' namespaces, and the device farm's (tests/helpers/devices.py), which come
# and go with another worker's tests: one was taken for ours once, when the files' order
# put test_devices_throughput beside test_sigkill_half_way_then_clean.
OTHERS = ("hoplab-", FARM_PREFIX)


def new_namespaces(before: set[str], name: str) -> set[str]:
    """Namespaces that appeared since `before` and may be ours: those of lab `name`
    and any that are neither another lab's nor the device farm's."""
    return {n for n in namespaces() - before
            if n.startswith(netns_prefix(name)) or not n.startswith(OTHERS)}


def nothing_of(name: str) -> None:
    """Nothing of lab `name` exists: namespaces, /etc/netns entries, state record."""
    assert lab_namespaces(name) == set()
    assert not list(ETC_NETNS.glob(f"{netns_prefix(name)}*"))
    assert not (LABS_DIR / f"{name}.json").exists()
    assert not (LABS_DIR / name).exists()


# --- reachability ----------------------------------------------------------------------


def test_chain_every_node_reaches_every_address(lab_up: LabUp) -> None:
    up = lab_up(path=EXAMPLES / "chain.toml")
    for src in up.plan.nodes:
        targets = [str(addr.ip) for dst in up.plan.nodes if dst.name != src.name
                   for iface in dst.ifaces for addr in iface.addrs]
        assert len(targets) >= 8
        assert unreachable(up, src.name, targets) == [], src.name
    out = assert_pings(up, "client", "server-v4")
    assert "ttl=62" in out  # two routers on the way back
    assert str(up.plan.node("server").primary4) in out
    out = assert_pings(up, "client", "server-v6")
    assert str(up.plan.node("server").primary6) in out
    assert_pings(up, "client", "server")
    assert_pings(up, "server", "client")
    assert_pings(up, "r2", "r1-v4")


@pytest.mark.parametrize("table", [
    "chain = 3", "star = 4", "grid = [3, 3]", "mesh = { nodes = 10, degree = 3, seed = 2 }",
])
def test_generated_labs_reach_every_node_by_name(lab_up: LabUp, table: str) -> None:
    up = lab_up(f"[generate]\n{table}\n")
    first, *others = up.plan.nodes
    targets = [name for node in others
               for name in (node.name, f"{node.name}-v4", f"{node.name}-v6")]
    assert unreachable(up, first.name, targets) == []
    # And back from the last node to the first one.
    assert_pings(up, others[-1].name, first.name + "-v4")


def test_chain_of_100_routers(tmp_path: Path, lab_name: str) -> None:
    # 101 hops are more than Linux's default TTL of 64, so a lab this deep starts
    # every node's packets (requests and replies) at TTL and hop limit 255.
    file = tmp_path / "c100.toml"
    file.write_text("[generate]\nchain = 100\n")
    proc = hoplab("lab", "up", str(file), "--name", lab_name, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    print(f"100-router chain built in {report['seconds']:.3f} s: {report['steps']}")
    assert report["name"] == lab_name
    assert len(report["nodes"]) == 102 and len(report["links"]) == 101
    assert report["seconds"] < 3  # usually well under 1.5 s
    client = f"{netns_prefix(lab_name)}client"
    for target in ("server-v4", "server-v6"):
        far = run_in(client, "ping", "-c1", "-W2", target)
        assert far.returncode == 0, far.stdout + far.stderr
        assert "ttl=155" in far.stdout  # 255 - 100 routers
        # With the usual TTL of 64 the 64th router says the packet died there.
        near = run_in(client, "ping", "-c1", "-W2", "-t", "64", target)
        assert near.returncode != 0
        assert "From r64" in near.stdout and "exceeded" in near.stdout, near.stdout
    assert hoplab("lab", "down", lab_name).returncode == 0
    assert lab_namespaces(lab_name) == set()


# --- shaping ---------------------------------------------------------------------------


# Alone: its shaper is a router's (r1's HTB), so no flow control of the sender's own
# stack keeps it busy. Beside the pool's other tests it read 93.77 against 94.32 (da421d2's
# fresh-clone run, nothing stolen) and 0.6 and 1.2 % low in 0a62295's; alone with a busy
# loop on one core, 94.15 to 94.49 in 4 of 4.
@pytest.mark.alone
def test_chain_100mbit_link_measures_100mbit_both_ways(lab_up: LabUp) -> None:
    up = lab_up(path=EXAMPLES / "chain.toml")
    server, client = up.ns("server"), up.ns("client")
    forward = steady_goodput(server, client, "server", cc=KERNEL_SHAPER_CC)
    reverse = steady_goodput(server, client, "server", "-R", cc=KERNEL_SHAPER_CC)
    print(f"chain.toml 100mbit: forward {forward:.2f}, reverse {reverse:.2f} Mbit/s")
    # "server" resolves to its IPv6 address first: 1428 bytes of payload a frame.
    expected = payload_mbit(100, ipv6=True)
    for got in (forward, reverse):
        assert abs(got - expected) <= RATE_TOLERANCE * expected, got


def test_per_direction_rate_override(lab_up: LabUp) -> None:
    up = lab_up("""
        [nodes.client]
        [nodes.server]
        [[links]]
        between = ["client", "server"]
        rate = "100mbit"
        reverse = { rate = "20mbit" }
    """.replace("        ", ""))
    server, client = up.ns("server"), up.ns("client")
    forward = steady_goodput(server, client, "server-v4", cc=KERNEL_SHAPER_CC)
    reverse = steady_goodput(server, client, "server-v4", "-R", cc=KERNEL_SHAPER_CC)
    print(f"100mbit / reverse 20mbit: forward {forward:.2f}, reverse {reverse:.2f} Mbit/s")
    for got, mbit in ((forward, 100), (reverse, 20)):
        assert abs(got - payload_mbit(mbit)) <= RATE_TOLERANCE * payload_mbit(mbit), got
    # The shaping is at each sender's egress: HTB on both ends of the veth.
    for node, rate in (("client", "100Mbit"), ("server", "20Mbit")):
        qdiscs = up.run(node, "tc", "class", "show", "dev", "eth0").stdout
        assert f"rate {rate}" in qdiscs, qdiscs


# --- NAT -------------------------------------------------------------------------------

PEER_SERVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(sys.argv[1])))
s.listen()
for _ in range(int(sys.argv[2])):
    conn, peer = s.accept()
    print(peer[0].removeprefix("::ffff:"), flush=True)
    conn.close()
"""
CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], 7777), timeout=5).close()"


def peers_seen_by_server(up: UpLab) -> list[str]:
    """The source address the server sees for a TCP connection from client, v4 then v6."""
    targets = ("server-v4", "server-v6")
    server = subprocess.Popen(
        ["ip", "netns", "exec", up.ns("server"), sys.executable, "-c", PEER_SERVER, "7777",
         str(len(targets))], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(up.ns("server"), 7777, server)
        for target in targets:
            proc = up.run("client", sys.executable, "-c", CONNECT, target)
            assert proc.returncode == 0, proc.stderr
        out, err = server.communicate(timeout=10)
        assert server.returncode == 0, err
        return out.split()
    finally:
        stop(server)


def test_nat_hides_the_client(lab_up: LabUp) -> None:
    up = lab_up(path=EXAMPLES / "nat.toml")
    r1 = up.plan.node("r1")
    toward_server = next(i for i in r1.ifaces if i.peer == "server")
    assert peers_seen_by_server(up) == [str(a.ip) for a in toward_server.addrs]
    rules = up.run("r1", "nft", "list", "ruleset").stdout
    assert f'oifname "{toward_server.name}" masquerade' in rules


def test_without_nat_the_server_sees_the_client(lab_up: LabUp) -> None:
    text = (EXAMPLES / "nat.toml").read_text()
    plain = "\n".join(line for line in text.splitlines() if not line.startswith("nat ="))
    assert plain != text
    up = lab_up(plain)
    client = up.plan.node("client")
    assert peers_seen_by_server(up) == [str(client.primary4), str(client.primary6)]


# --- WireGuard -------------------------------------------------------------------------

NFT_COUNT = """
table inet hoplabtest {{
  chain post {{
    type filter hook postrouting priority 0; policy accept;
    oifname "{dev}" udp dport {port} counter
    oifname "{dev}" meta l4proto {{ icmp, tcp }} counter
  }}
}}
"""


def nft_counters(up: UpLab, node: str) -> list[dict[str, int]]:
    out = up.run(node, "nft", "-j", "list", "table", "inet", "hoplabtest").stdout
    counters = []
    for item in json.loads(out)["nftables"]:
        for expr in item.get("rule", {}).get("expr", []):
            if "counter" in expr:
                counters.append(expr["counter"])
    return counters


def test_wireguard_hops_and_tunnel(lab_up: LabUp) -> None:
    up = lab_up(path=EXAMPLES / "wireguard-hops.toml")
    r1 = up.plan.node("r1")
    wg = next(i for i in r1.ifaces if i.kind == "wg-hop" and i.peer == "r2")
    veth = next(i for i in r1.ifaces if i.kind == "veth" and i.peer == "r2")
    port = next(e.listen_port for e in up.plan.wireguard if (e.node, e.ifname) == ("r1", wg.name))
    add = run_in(up.ns("r1"), "nft", "-f", "-", input=NFT_COUNT.format(dev=veth.name, port=port))
    assert add.returncode == 0, add.stderr

    assert_pings(up, "client", "server")
    assert_pings(up, "client", "server-v4")
    assert_pings(up, "client", "server.exit")
    assert_pings(up, "server", "client.exit")

    # A burst of 1000-byte pings over IPv4: 1028-byte packets cross r1's hop tunnel.
    count, size = 50, 1000
    wg_before = link_stats(up.ns("r1"), wg.name)
    (udp_before, plain_before) = nft_counters(up, "r1")
    burst = up.run("client", "ping", "-4", "-q", "-c", str(count), "-i", "0.005",
                   "-s", str(size), "-W2", "server")
    assert burst.returncode == 0, burst.stdout
    wg_after = link_stats(up.ns("r1"), wg.name)
    (udp_after, plain_after) = nft_counters(up, "r1")
    sent = count * (size + 8 + 20)
    assert wg_after["tx_bytes"] - wg_before["tx_bytes"] >= sent
    assert wg_after["rx_bytes"] - wg_before["rx_bytes"] >= sent  # the replies
    # On the wire between r1 and r2 it is WireGuard's UDP, never the bare ICMP.
    assert udp_after["bytes"] - udp_before["bytes"] >= sent
    assert udp_after["packets"] - udp_before["packets"] >= count
    assert plain_after["packets"] == plain_before["packets"]

    # The end-to-end tunnel rides inside the hop tunnels: WireGuard in WireGuard.
    exit_before = link_stats(up.ns("client"), "wg-exit")
    wg_before = link_stats(up.ns("r1"), wg.name)
    (udp_before, plain_before) = nft_counters(up, "r1")
    data = iperf3(up.ns("server"), up.ns("client"), "server.exit", "-n", "2M",
                  seconds=None)
    assert int(data["end"]["sum_sent"]["bytes"]) >= 2 * 1024 * 1024
    # What surely crossed by the test's end; the counters below must hold at least that.
    # No amount is asserted: the flow is userspace WireGuard in WireGuard, and beside
    # another test 813 kB of the 2 MiB had arrived when iperf3 ended (a fresh-clone CI
    # run; it had asserted 1 MB). What this test checks is where the bytes went.
    got = int(data["end"]["sum_received"]["bytes"])
    assert got > 0
    assert data["start"]["connected"][0]["remote_host"] in {
        str(a.ip) for i in up.plan.node("server").ifaces if i.kind == "wg-tunnel"
        for a in i.addrs}
    exit_after = link_stats(up.ns("client"), "wg-exit")
    wg_after = link_stats(up.ns("r1"), wg.name)
    (udp_after, plain_after) = nft_counters(up, "r1")
    assert exit_after["tx_bytes"] - exit_before["tx_bytes"] >= got
    assert wg_after["tx_bytes"] - wg_before["tx_bytes"] >= got
    assert udp_after["bytes"] - udp_before["bytes"] >= got
    assert plain_after["packets"] == plain_before["packets"]

    # Every wireguard-go is recorded, alive, and lives in its node's namespace.
    proc = hoplab("lab", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    mine = next(x for x in json.loads(proc.stdout) if x["name"] == up.name)
    assert mine["problems"] == [] and mine["status"] == "up"
    want = {(e.node, f"wireguard-go {e.ifname}") for e in up.plan.wireguard}
    assert {(p["node"], p["role"]) for p in mine["processes"]} == want
    assert len(mine["processes"]) == len(want) == 6
    for p in mine["processes"]:
        assert p["alive"] is True
        assert p["pid"] in pids_in({up.ns(p["node"])}) & live_pids("wireguard-go")
    assert {t["name"] for t in mine["tunnels"]} == {"exit"}


def test_wireguard_build_does_not_wait_for_a_handshake_retry(lab_up: LabUp) -> None:
    """Bringing up the tunnels takes well under a second here; when the first
    handshake is lost, WireGuard retries only after 5 s (REKEY_TIMEOUT) and the
    build takes 5 s longer. Three builds in a row must all be quick."""
    text = (EXAMPLES / "wireguard-hops.toml").read_text()
    took = []
    for _ in range(3):
        up = lab_up(text)
        took.append(round(up.result.steps["wireguard"], 2))
        assert_pings(up, "client", "server.exit")
    print(f"wireguard step of wireguard-hops.toml: {took} s")
    assert max(took) < 2.5, took


# --- CLI: exec, status, up twice ----------------------------------------------------------


def test_exec_passes_the_exit_code_through(lab_up: LabUp) -> None:
    up = lab_up(path=EXAMPLES / "chain.toml")
    assert hoplab("lab", "exec", up.name, "client", "--", "sh", "-c", "exit 7").returncode == 7
    ok = hoplab("lab", "exec", up.name, "client", "--", "ping", "-c1", "-W2", "server")
    assert ok.returncode == 0, ok.stderr
    assert hoplab("lab", "exec", up.name, "r1", "--", "sh", "-c",
                  'test "$HOPLAB_NODE" = r1').returncode == 0
    no_lab = hoplab("lab", "exec", "nosuchlab" + secrets.token_hex(2), "client", "--", "true")
    assert no_lab.returncode == 2
    assert "no lab named" in no_lab.stderr
    no_node = hoplab("lab", "exec", up.name, "nosuchnode", "--", "true")
    assert no_node.returncode == 2
    assert "nosuchnode" in no_node.stderr and "client" in no_node.stderr


def test_status_lists_the_lab_and_reports_a_downed_interface(lab_up: LabUp) -> None:
    up = lab_up(path=EXAMPLES / "chain.toml")

    def mine() -> dict[str, Any]:
        proc = hoplab("lab", "status", "--json")
        assert proc.returncode == 0, proc.stderr
        return next(x for x in json.loads(proc.stdout) if x["name"] == up.name)

    st = mine()
    assert st["status"] == "up" and st["problems"] == []
    assert set(st["nodes"]) == {"client", "r1", "r2", "server"}
    assert [link["between"] for link in st["links"]] == [["client", "r1"], ["r1", "r2"],
                                                         ["r2", "server"]]
    assert st["links"][1]["forward"] == {"rate_bps": 100_000_000}
    assert all(n["present"] for n in st["nodes"].values())
    assert st["nodes"]["r1"]["link_state"] == {"eth0": "up", "eth1": "up"}
    assert st["processes"] == []

    down = subprocess.run(["ip", "-n", up.ns("r1"), "link", "set", "eth0", "down"],
                          capture_output=True, text=True, check=False)
    assert down.returncode == 0, down.stderr
    st = mine()
    assert st["status"] == "degraded"
    assert any("r1/eth0" in p and "down" in p for p in st["problems"]), st["problems"]
    human = hoplab("lab", "status")
    assert human.returncode == 0 and "r1/eth0" in human.stdout
    # Its queues' packets are said to be the qdisc's, GSO super-frames counting one.
    assert "count a GSO super-frame of up to 64 KiB as one packet" in " ".join(
        human.stdout.split())


def test_up_twice_with_the_same_name(lab_up: LabUp, tmp_path: Path) -> None:
    up = lab_up(path=EXAMPLES / "chain.toml")
    before = namespaces()
    again = hoplab("lab", "up", str(EXAMPLES / "chain.toml"), "--name", up.name)
    assert again.returncode == 2
    assert "already up" in again.stderr
    # The lab that was up is untouched.
    assert new_namespaces(before, up.name) == set()
    assert lab_namespaces(up.name) == {n.netns for n in up.plan.nodes}
    assert_pings(up, "client", "server")


# --- bad input -------------------------------------------------------------------------

BAD = {
    "unknown-key": ('[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\nrat = "1mbit"\n',
                    6, "links[0].rat"),
    "duplicate-node": ("[nodes.a]\n[nodes.b]\n[nodes.a]\n", 4, "nodes.a"),
    "unknown-node": ('[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "x"]\n', 5,
                     "links[0].between"),
    "mbps": ('[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\nrate = "100mbps"\n', 6,
             "links[0].rate"),
    "bad-cidr": ('[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n'
                 'subnet4 = "10.9.0.1/30"\n', 6, "links[0].subnet4"),
    "negative-chain": ("[generate]\nchain = -1\n", 3, "generate.chain"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_before_anything_is_built(case: str, tmp_path: Path,
                                                       lab_name: str) -> None:
    body, line, key = BAD[case]
    file = tmp_path / "bad.toml"
    file.write_text(f'name = "{lab_name}"\n{body}')
    before, links = namespaces(), root_links()
    proc = hoplab("lab", "up", str(file))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{file}:{line}: {key}:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert new_namespaces(before, lab_name) == set()
    assert root_links() == links
    nothing_of(lab_name)


def test_delay_forced_onto_netem_needs_netem(tmp_path: Path, lab_name: str) -> None:
    # Without emulator = "netem", a kernel without netem carries the delay in
    # hoplab-wire (tests/lab/test_wire.py).
    file = tmp_path / "delay.toml"
    file.write_text('[nodes.a]\n[nodes.b]\n[nodes.c]\n[[links]]\nbetween = ["a", "b"]\n'
                    '[[links]]\nbetween = ["b", "c"]\ndelay = "20ms"\nemulator = "netem"\n')
    before = namespaces()
    proc = hoplab("lab", "up", str(file), "--name", lab_name)
    if probe().qdiscs.get("netem"):
        assert proc.returncode == 0, proc.stderr
        assert len(lab_namespaces(lab_name)) == 3
        assert hoplab("lab", "down", lab_name).returncode == 0
    else:
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "links[1]" in proc.stderr and "netem" in proc.stderr, proc.stderr
        assert "links[0]" not in proc.stderr
        assert new_namespaces(before, lab_name) == set()
    nothing_of(lab_name)


# --- crash safety and clean ------------------------------------------------------------


@pytest.fixture
def no_foreign_labs() -> None:
    """A plain `hoplab clean` removes every hoplab lab on the machine that no live
    hoplab process uses: never run it while somebody else's such labs are up."""
    used = [s for s in all_states() if in_use(s)]
    spared = {f"record {s.name}" for s in used} | {n for s in used for n in s.namespaces}
    others = foreign_labs() - spared
    if others:
        pytest.skip(f"hoplab clean would remove labs that are not ours: {sorted(others)[:3]}")


def snapshot() -> tuple[set[str], set[str], set[int]]:
    return namespaces(), root_links(), live_pids("wireguard-go", "iperf3")


def assert_back_to(before: tuple[set[str], set[str], set[int]], name: str) -> None:
    """The machine is as it was: nothing of ours new in `ip netns list`, `ip -o link`
    (hoplab's interface names) or the wireguard-go/iperf3 processes (zombies waiting
    for init do not count). Other labs and tools may come and go meanwhile."""
    deadline = time.monotonic() + 5
    while True:
        ns, links, pids = snapshot()
        # A daemon in some other, named namespace is somebody else's; ours had theirs
        # deleted, so a leftover of ours lives in a namespace without a name.
        pids -= pids_in(ns)
        if pids <= before[2] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert {n for n in ns - before[0]
            if n.startswith(netns_prefix(name)) or not n.startswith(OTHERS)} == set()
    # Only hoplab's own namespaces may have gone (a clean removes stale ones too).
    assert {n for n in before[0] - ns if not n.startswith(OTHERS)} == set()
    assert links == before[1]
    assert pids - before[2] == set()
    nothing_of(name)


def start_up(file: Path, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*HOPLAB, "lab", "up", str(file), "--name", name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_half_built(proc: subprocess.Popen[str], name: str, wireguard: bool) -> None:
    """Poll until the lab is partly there: its first namespaces, or with `wireguard`
    its first wireguard-go daemon; the build must still be running."""
    deadline = time.monotonic() + 30
    prefix = netns_prefix(name)
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            ours = {n for n in os.listdir("/run/netns") if n.startswith(prefix)}
        except FileNotFoundError:
            ours = set()
        if ours and (not wireguard or pids_in(ours) & live_pids("wireguard-go")):
            return
        time.sleep(0.002)
    _, err = proc.communicate(timeout=30)
    pytest.fail(f"lab up finished (exit {proc.returncode}) before it could be interrupted: "
                f"{err[-300:]}")


CHAIN_150 = "[generate]\nchain = 150\n"


def interrupt_half_way(kind: str, tmp_path: Path, lab_name: str,
                       sig: signal.Signals) -> tuple[subprocess.Popen[str], str]:
    """Start `hoplab lab up` of a chain or a WireGuard lab, send `sig` once it is
    half built, and return the finished process and its stderr."""
    file = tmp_path / "lab.toml"
    if kind == "chain150":
        file.write_text(CHAIN_150)
    else:
        file.write_text((EXAMPLES / "wireguard-hops.toml").read_text())
    proc = start_up(file, lab_name)
    try:
        wait_half_built(proc, lab_name, wireguard=kind == "wireguard")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    return proc, err


@pytest.mark.parametrize("kind", ["chain150", "wireguard"])
def test_sigkill_half_way_then_clean(kind: str, tmp_path: Path, lab_name: str) -> None:
    before = snapshot()
    proc, _ = interrupt_half_way(kind, tmp_path, lab_name, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert lab_namespaces(lab_name)  # killed half way: things are left
    cleaned = hoplab("clean", lab_name)
    assert cleaned.returncode == 0, cleaned.stderr
    assert lab_name in cleaned.stdout
    assert_back_to(before, lab_name)


@pytest.mark.parametrize("kind", ["chain150", "wireguard"])
def test_ctrl_c_half_way_leaves_nothing(kind: str, tmp_path: Path, lab_name: str) -> None:
    before = snapshot()
    proc, err = interrupt_half_way(kind, tmp_path, lab_name, signal.SIGINT)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
    assert_back_to(before, lab_name)  # without any `hoplab clean`


@pytest.mark.machine
@pytest.mark.usefixtures("no_foreign_labs")
def test_clean_is_idempotent_and_spares_foreign_namespaces(lab_name: str) -> None:
    keep = f"keepme-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", keep], check=True)
    try:
        up = hoplab("lab", "up", str(EXAMPLES / "chain.toml"), "--name", lab_name)
        assert up.returncode == 0, up.stderr
        assert len(lab_namespaces(lab_name)) == 4
        first = hoplab("clean")
        assert first.returncode == 0, first.stderr
        assert lab_name in first.stdout
        nothing_of(lab_name)
        second = hoplab("clean")
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == "nothing to clean"
        assert keep in namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", keep], check=False)


def test_clean_removes_an_unreadable_lab_record(lab_name: str) -> None:
    LABS_DIR.mkdir(parents=True, exist_ok=True)
    record = LABS_DIR / f"{lab_name}.json"
    record.write_text('{"name": "trunc')  # a record cut off by a crash mid-write
    blocked = hoplab("lab", "up", str(EXAMPLES / "chain.toml"), "--name", lab_name)
    assert blocked.returncode != 0 and "unreadable lab state" in blocked.stderr
    assert lab_namespaces(lab_name) == set()
    cleaned = hoplab("clean", lab_name)
    assert cleaned.returncode == 0
    assert f"removed unreadable lab record {lab_name}.json" in cleaned.stdout
    assert not record.exists()
    up = hoplab("lab", "up", str(EXAMPLES / "chain.toml"), "--name", lab_name)
    assert up.returncode == 0, up.stderr
    assert hoplab("lab", "down", lab_name).returncode == 0
