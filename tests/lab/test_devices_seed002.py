"""Seed 002 against an emulated router, as the issue's "done when" tries it:
`hoplab lab up examples/devices/router-dut.toml`, then `hoplab run` of
examples/devices/nat-gro.toml; runs name the device and their samplers and profile come
from it; Ctrl-C and SIGKILL during a run leave nothing on the device after `hoplab clean`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.lab.where import netns_prefix
from hoplab.store.store import open_store
from tests.helpers.device_labs import EXAMPLES, adapt, cable_router, configure, nic_names
from tests.helpers.devices import Device, Farm, farm
from tests.helpers.lab import HOPLAB, hoplab, namespaces

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


def _bench(devices: Farm, tmp_path: Path, lab_name: str
           ) -> tuple[Path, Path, Device, dict[str, str]]:
    nics = nic_names("hl-c0", "hl-s0")
    router = cable_router(devices, nics)
    lab = tmp_path / "router-dut.toml"
    lab.write_text(adapt((EXAMPLES / "router-dut.toml").read_text(), {"root@10.99.0.2": router},
                         nics).replace('name = "dut"', f'name = "{lab_name}"'))
    exp = tmp_path / "nat-gro.toml"
    exp.write_text((EXAMPLES / "nat-gro.toml").read_text())
    return lab, exp, router, nics


def _commands(pids: set[int]) -> list[str]:
    out = []
    for pid in sorted(pids):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return out


def _gro(router: Device) -> str:
    out = router.exec("ethtool", "-k", "rt0").stdout
    return out.split("generic-receive-offload:")[1].split()[0]


def _nat_table(router: Device) -> bool:
    return router.exec("nft", "list", "table", "ip", "hoplab_nat").returncode == 0


def test_seed_002_done_when(devices: Farm, tmp_path: Path, lab_name: str) -> None:
    lab, exp, router, _nics = _bench(devices, tmp_path, lab_name)
    configure(router, ["ethtool", "-K", "rt0", "gro", "on"])
    up = hoplab("lab", "up", str(lab))
    assert up.returncode == 0, up.stderr
    db = tmp_path / "runs.db"
    # Two runs of each GRO setting, not the example's four: each run is checked alone,
    # and most of one's time is the device's (facts, perf, samplers), not its 2 s test.
    run = hoplab("run", str(exp), "--db", str(db), "--set", "duration=2s", "--set",
                 "repeat=2", timeout=400)
    assert run.returncode == 0, run.stdout + run.stderr
    store = open_store(str(db))
    runs = [store.get_run(i) for i in range(1, 5)]
    assert len(runs) == 4 and all(r.status == "ok" for r in runs), [r.error for r in runs]
    assert sorted(r.variant["gro"] for r in runs) == ["off"] * 2 + ["on"] * 2
    for r in runs:
        facts = r.metadata["nodes"]["router"]
        # The device names the runs: its firmware, and its model (else the host SSH reached).
        assert r.labels["firmware"] == facts["firmware"] and facts["firmware"]
        assert r.labels["device"] == (facts.get("model") or router.address)
        # Its offloads are the variant's, read from the device during the run.
        assert facts["offloads"]["rt0"]["generic-receive-offload"] == r.variant["gro"]
        # Samplers ran on the device: its per-core CPU and its ports' byte counters.
        names = {(s.name, s.node) for s in r.series}
        assert ("cpu.softirq", "router") in names and ("iface.rx_bytes", "router") in names
        # perf ran on the device, and its stacks came back.
        assert r.metadata["profile"]["status"] == "ok", r.metadata["profile"]
        assert r.metadata["profile"]["samples"] > 100
        # ...and says it covers the router's CPUs, all of its samples the router's.
        assert r.metadata["profile"]["attribution"].startswith(
            "device-wide: perf ran on router itself"), r.metadata["profile"]["attribution"]
        mine = r.metadata["profile"]["by_node"]["router"]
        assert mine["whole_machine"] and mine["samples"] == r.metadata["profile"]["samples"]
    # The lab that was up is up again, and the device is as the lab file leaves it.
    state = json.loads(Path(f"/run/hoplab/labs/{lab_name}.json").read_text())
    assert state["status"] == "up"
    assert _gro(router) == "on" and not _nat_table(router)
    down = hoplab("lab", "down", lab_name)
    assert down.returncode == 0, down.stderr
    assert not router.pids()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_run_stopped_leaves_nothing_on_the_device_after_clean(
        devices: Farm, tmp_path: Path, lab_name: str, sig: signal.Signals) -> None:
    _lab, exp, router, nics = _bench(devices, tmp_path, lab_name)
    configure(router, ["ethtool", "-K", "rt0", "gro", "on"])
    run_lab = f"{lab_name}r"
    with subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(tmp_path / "runs.db"),
                           "--set", "duration=30s", "--set", "repeat=1",
                           "--lab-name", run_lab],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True) as proc:
        try:
            # Until perf and the sampler run on the device, and the lab changed it.
            deadline = time.monotonic() + 60
            while not (router.pids() and _nat_table(router)):
                assert time.monotonic() < deadline, "the run never started on the device"
                assert proc.poll() is None
                time.sleep(0.2)
            time.sleep(1.0)
        finally:
            os.kill(proc.pid, sig)
            proc.wait(timeout=60)
    if sig == signal.SIGINT:
        assert proc.returncode != 0
    clean = hoplab("clean", run_lab)
    assert clean.returncode == 0, clean.stderr
    deadline = time.monotonic() + 10
    while router.pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not router.pids(), _commands(router.pids())
    assert _gro(router) == "on" and not _nat_table(router)
    assert not any(n.startswith(netns_prefix(run_lab)) for n in namespaces())
    for nic in nics.values():
        assert Path("/sys/class/net", nic).exists(), f"{nic} did not come back"
    # Nothing of ours left here either: no iperf3 in a namespace of the run's lab.
    assert not Path(f"/run/hoplab/labs/{run_lab}.json").exists()
