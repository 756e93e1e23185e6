"""Seed 000 against emulated devices: examples/devices/mesh-exit.toml (a namespace behind
two mesh routers with a WireGuard tunnel per hop, made by setup commands on them, to an
exit server over SSH) and mesh-exit-run.toml, as written but for addresses and keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.store.store import open_store
from tests.helpers.device_labs import EXAMPLES, adapt, cable_mesh, nic_names
from tests.helpers.devices import Farm, farm
from tests.helpers.lab import hoplab

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


def _delta(values: list[float]) -> float:
    return values[-1] - values[0] if values else 0.0


def test_mesh_with_wireguard_hops_to_an_exit(devices: Farm, tmp_path: Path,
                                             lab_name: str) -> None:
    nics = nic_names("hl-m0")
    mesh = cable_mesh(devices, nics["hl-m0"])
    text = adapt((EXAMPLES / "mesh-exit.toml").read_text(),
                 {"root@mesh-gw": mesh["gw"], "root@mesh-relay": mesh["relay"],
                  "root@exit.example.net": mesh["exit"]}, nics)
    (tmp_path / "mesh-exit.toml").write_text(text)
    exp = tmp_path / "mesh-exit-run.toml"
    exp.write_text((EXAMPLES / "mesh-exit-run.toml").read_text())
    db = tmp_path / "runs.db"
    got = hoplab("run", str(exp), "--db", str(db), "--lab-name", lab_name, "--set",
                 "repeat=1", "--set", "duration=2s", timeout=400)
    assert got.returncode == 0, got.stdout + got.stderr
    with open_store(str(db)) as store:
        runs = {r.test: r for r in (store.get_run(i) for i in range(1, 5))}
    assert sorted(runs) == ["latency", "tcp-down", "tcp-up", "udp-up"]
    assert all(r.status == "ok" for r in runs.values()), {t: r.error for t, r in runs.items()}
    # The upload crossed both tunnels: the relay received it on the WireGuard hop from gw.
    up = runs["tcp-up"]
    payload = sum(m.value for m in up.metrics if m.name == "bytes_received" and m.flow)
    rx = next(s for s in up.series if s.name == "iface.rx_bytes" and s.node == "relay"
              and s.key == "wgm0")
    assert _delta(rx.v) >= payload, (_delta(rx.v), payload)
    assert any(m.name == "rtt_median" for m in runs["latency"].metrics)
    # The tunnels are gone with their wireguard-go, and nothing else runs on a device.
    for dev in mesh.values():
        assert "wgm" not in dev.exec("ip", "-o", "link").stdout
        assert not dev.pids()
    # Seed 001 on the same mesh: perf on the relay during a UDP flow, its stacks back.
    prof = tmp_path / "mesh-exit-profile.toml"
    prof.write_text((EXAMPLES / "mesh-exit-profile.toml").read_text())
    got = hoplab("run", str(prof), "--db", str(db), "--lab-name", lab_name, "--set",
                 "duration=3s", timeout=400)
    assert got.returncode == 0, got.stdout + got.stderr
    with open_store(str(db)) as store:
        run = store.get_run(5)
    assert run.status == "ok" and run.test == "udp-through-tunnels", run.error
    profile = run.metadata["profile"]
    assert profile["status"] == "ok" and profile["samples"] > 100, profile
    assert profile["by_node"].keys() == {"relay"}
    # wireguard-go carried the flow (on an emulated device perf sees the whole host,
    # so this share includes the other devices' tunnels too).
    shares = {m.name: m.value for m in run.metrics if m.name.startswith("profile.")}
    assert shares.get("profile.wireguard", 0) + shares.get("profile.crypto", 0) > 1, shares
    for dev in mesh.values():
        assert not dev.pids()
