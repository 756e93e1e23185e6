"""Traffic, samplers, facts and profiles on an OpenWrt-like device (BusyBox and dropbear
only, no Python, no perf, no ethtool), as a server for a local namespace's flows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.store.store import open_store
from tests.helpers.device_labs import configure, nic_names
from tests.helpers.devices import OPENWRT_MODEL, Farm, farm
from tests.helpers.lab import hoplab

pytestmark = [pytest.mark.root, pytest.mark.slow]

LAB = '''name = "{name}"
[nodes.client]
[nodes.owrt]
ssh = "root@{address}"
ssh_options = {{ identity = "{identity}", known_hosts = "{known_hosts}" }}
[[links]]
between = ["client", "owrt"]
attach = {{ client = "{nic}" }}
addresses = {{ client = ["192.168.1.2/24", "fd01::2/64"], owrt = ["192.168.1.1", "fd01::1"] }}
'''

EXPERIMENT = '''lab = "lab.toml"
[profile]
nodes = ["owrt"]
[[tests]]
name = "up"
kind = "tcp"
from = "client"
to = "owrt"
duration = "3s"
samplers = { nodes = ["owrt"], kinds = ["cpu", "ifaces", "qdisc", "tcp"] }
[[tests]]
name = "down"
kind = "tcp"
from = "client"
to = "owrt"
direction = "down"
duration = "3s"
[[tests]]
name = "voip"
kind = "probe"
from = "client"
to = "owrt"
family = 6
duration = "3s"
[[tests]]
name = "ping"
kind = "ping"
from = "client"
to = "owrt"
duration = "3s"
'''


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


def test_flows_to_and_from_an_openwrt_like_device(devices: Farm, tmp_path: Path,
                                                  lab_name: str) -> None:
    nic = nic_names("c")["c"]
    owrt = devices.add("openwrt-like")
    owrt.cable("lan0", nic)
    # IPv6 too, on the cable: its address is the device's own (no DAD wait, as an
    # address that has been up for a while).
    configure(owrt, ["ip", "addr", "add", "192.168.1.1/24", "dev", "lan0"],
              ["sysctl", "-w", "net.ipv6.conf.lan0.accept_dad=0"],
              ["ip", "addr", "add", "fd01::1/64", "dev", "lan0"],
              ["ip", "link", "set", "lan0", "up"])
    (tmp_path / "lab.toml").write_text(LAB.format(
        name=lab_name, address=owrt.address, identity=devices.identity,
        known_hosts=devices.known_hosts, nic=nic))
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT)
    db = tmp_path / "runs.db"
    got = hoplab("run", str(exp), "--db", str(db), "--lab-name", lab_name, timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
    with open_store(str(db)) as store:
        runs = {r.test: r for r in (store.get_run(i, raw=True) for i in range(1, 5))}
    assert {t: r.status for t, r in runs.items()} == dict.fromkeys(
        ("up", "down", "voip", "ping"), "ok"), {t: r.error for t, r in runs.items()}
    up = runs["up"]
    # The device names the runs: OpenWrt's model file and release.
    assert up.labels["device"] == OPENWRT_MODEL
    assert up.labels["firmware"].startswith("OpenWrt 23.05.5")
    # Its clock against this machine's, with the uncertainty of the estimate.
    clock = up.metadata["clocks"]["owrt"]
    assert abs(clock["offset_s"]) < clock["uncertainty_s"] + 0.05 and clock["uncertainty_s"] < 0.1
    # Its sampler: per-core CPU; no tc there, so qdiscs are missing with the reason.
    assert any(s.name == "cpu.softirq" and s.node == "owrt" for s in up.series)
    # The sampler's own cost on the device: a series, and its load-phase mean stored as a
    # metric (the budget: at most 2 % of one core), which `hoplab show` prints.
    cost = next(s for s in up.series if s.name == "sampler.cpu" and s.node == "owrt")
    [spent] = [m for m in up.metrics if m.name == "sampler.cpu"]
    assert (spent.node, spent.unit) == ("owrt", "%")
    assert min(cost.v) <= spent.value <= max(cost.v) and 0 < spent.value <= 2.0, spent
    shown = hoplab("show", str(up.id), "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    head = next(i for i, x in enumerate(lines) if "sampler CPU" in x)
    row = next(x for x in lines[head:] if x.strip("│ ").startswith("owrt "))
    assert f"{spent.value:.2f} %" in row, shown.stdout
    # No perf on it: the profile is missing, saying what to install.
    assert up.metadata["profile"]["status"] == "missing"
    assert "opkg install perf" in up.metadata["profile"]["reason"]
    goodput = {t: next(m.value for m in runs[t].metrics if m.name == "goodput" and m.flow is None)
               for t in ("up", "down")}
    assert all(v > 50e6 for v in goodput.values()), goodput
    assert any(m.name == "rtt_median" for m in runs["voip"].metrics)
    # The probe crossed the cable over IPv6, to the device's own IPv6 address.
    irtt = json.loads(next(r.data for r in runs["voip"].raw if r.name == "voip irtt"))
    assert irtt["config"]["remote_address"].startswith("[fd01::1]:"), irtt["config"]
    assert irtt["config"]["local_address"].startswith("[fd01::2]:")
    # irtt's one-way delays to the device cross two clocks, known to a few ms at best over
    # SSH (BusyBox's `date +%s`: the edge of a second), far more than a tenth of this
    # sub-millisecond RTT: RTT only, said, not one-way figures off by the clocks.
    assert not [m for m in runs["voip"].metrics if m.name.startswith("owd")]
    assert runs["voip"].metadata["one_way"]["voip"].startswith("RTT only: the clocks of")
    assert any(m.name == "rtt_median" for m in runs["ping"].metrics)
    assert not owrt.pids()
    # BusyBox's ping cannot time each reply: a ping from the device is refused up front.
    exp.write_text(EXPERIMENT.replace('from = "client"\nto = "owrt"\nduration = "3s"\n\'\'\'',
                                      "") + '[[tests]]\nname = "p"\nkind = "ping"\n'
                   'from = "owrt"\nto = "client"\nduration = "2s"\n')
    got = hoplab("run", str(exp), "--db", str(db), "--lab-name", lab_name, timeout=120)
    assert got.returncode == 2, got.stdout + got.stderr
    assert "device owrt has a ping without per-reply timestamps" in got.stderr, got.stderr
    assert "opkg install iputils-ping (OpenWrt)" in got.stderr
