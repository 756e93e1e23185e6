"""A remote end with no address on its cable takes the address its SSH server was reached
at (seed 000's exit server: one public address, for SSH and for the flows). The
emulated server's uplink is a bridge holding its management port and the port cabled to
this machine, with its management address on it, as a server's LAN is; the lab gives
the server no address, and a flow from a local namespace reaches it at that address,
over the cable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from ipaddress import ip_address
from pathlib import Path

import pytest

from hoplab.store.store import open_store
from tests.helpers.device_labs import configure, nic_names
from tests.helpers.devices import Farm, farm
from tests.helpers.lab import hoplab

pytestmark = pytest.mark.root

LAB = '''name = "{name}"
[nodes.client]
[nodes.exit]
ssh = "root@{address}"
ssh_options = {{ identity = "{identity}", known_hosts = "{known_hosts}" }}
[[links]]
between = ["client", "exit"]
attach = {{ client = "{nic}" }}
addresses = {{ client = "{client}/24" }}
'''

EXPERIMENT = '''lab = "lab.toml"
[[tests]]
name = "to-exit"
kind = "udp"
from = "client"
to = "exit"
rate = "20mbit"
length = 1200
duration = "1s"
samplers = { nodes = ["exit"], kinds = ["ifaces"], interval = "100ms" }
'''


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


def test_a_remote_end_without_an_address_is_reached_where_ssh_reaches_it(
        devices: Farm, tmp_path: Path, lab_name: str) -> None:
    nic = nic_names("c")["c"]
    exit_ = devices.add("linux-board")
    exit_.cable("wan0", nic)
    mgmt = f"{exit_.name}d"
    gateway = exit_.address.rsplit(".", 1)[0] + f".{int(exit_.address.rsplit('.', 1)[1]) - 1}"
    # Its own configuration: its address on a bridge of its management port and the port
    # cabled to this PC (the bridge keeps the port's MAC: SSH's ARP entry stays good).
    mac = exit_.exec("cat", f"/sys/class/net/{mgmt}/address").stdout.strip()
    configure(exit_, ["sh", "-c", " && ".join([
        f"ip link add br0 address {mac} type bridge", f"ip link set {mgmt} master br0",
        "ip link set wan0 master br0", "ip link set wan0 up", "ip link set br0 up",
        f"ip addr del {exit_.address}/30 dev {mgmt}",
        f"ip addr add {exit_.address}/24 dev br0",
        f"ip route replace default via {gateway} dev br0"])])
    # The client's address: in the server's /24, outside its management /30.
    client = ip_address(exit_.address) + 128 if ip_address(exit_.address).packed[3] < 128 \
        else ip_address(exit_.address) - 128
    (tmp_path / "lab.toml").write_text(LAB.format(
        name=lab_name, address=exit_.address, identity=devices.identity,
        known_hosts=devices.known_hosts, nic=nic, client=client))
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT)
    db = tmp_path / "runs.db"
    got = hoplab("run", str(exp), "--db", str(db), "--lab-name", lab_name, timeout=120)
    assert got.returncode == 0, got.stdout + got.stderr
    with open_store(str(db)) as store:
        run = store.get_run(1, raw=True)
    assert run.status == "ok", run.error
    # The flow went to the address SSH reached...
    raw = next(r for r in run.raw if r.name.endswith("iperf3"))
    start = json.loads(raw.data)["start"]
    assert start["connected"][0]["remote_host"] == exit_.address, start["connected"]
    flow = {m.name: m.value for m in run.metrics if m.flow == "to-exit"}
    assert flow["loss"] == 0 and flow["goodput"] == pytest.approx(20e6, rel=0.01), flow
    # ...over the cable: the server's wan0 port took the flow's datagrams, each
    # 1200 + 8 + 20 + 14 bytes (UDP, IPv4, Ethernet; a veth counts no FCS), but for a
    # few of iperf3's control segments; its management port took none of them.
    port = {(m.name, m.key): m.value for m in run.metrics if m.node == "exit"}
    frames, octets = port[("iface.rx_packets", "wan0")], port[("iface.rx_bytes", "wan0")]
    assert frames >= 0.8 * flow["packets"], (frames, flow)
    assert 0.98 * 1242 <= octets / frames <= 1242, (octets, frames)
    assert port[("iface.rx_packets", mgmt)] < 0.05 * flow["packets"], port
