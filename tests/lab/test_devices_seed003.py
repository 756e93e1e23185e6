"""Seed 003 against three emulated boards: examples/devices/whle-router.toml and
whle-router-mode.toml, as written but for the boards' addresses and keys."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.record import RawOutput
from hoplab.store.store import open_store
from tests.helpers.device_labs import EXAMPLES, adapt, cable_boards
from tests.helpers.devices import Farm, farm
from tests.helpers.lab import hoplab

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


def test_three_boards_four_pinned_flows(devices: Farm, tmp_path: Path, lab_name: str) -> None:
    boards = cable_boards(devices)
    text = adapt((EXAMPLES / "whle-router.toml").read_text(),
                 {f"root@whle-{k}": boards[role]
                  for k, role in enumerate(("server", "router", "client"))})
    (tmp_path / "whle-router.toml").write_text(text)
    exp = tmp_path / "whle-router-mode.toml"
    exp.write_text((EXAMPLES / "whle-router-mode.toml").read_text())
    db = tmp_path / "runs.db"
    got = hoplab("run", str(exp), "--db", str(db), "--lab-name", lab_name, "--set",
                 "repeat=1", "--set", "duration=4s", timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
    with open_store(str(db)) as store:
        run = store.get_run(1)
    assert run.status == "ok", run.error
    rates = {m.flow: m.value for m in run.metrics if m.name == "sent_rate"}
    flows = sorted(f for f in rates if f is not None)
    assert len(flows) == 4
    # The summed sender rate is the flows' rates added up (they run side by side).
    assert abs(rates[None] - sum(rates[f] for f in flows)) <= 0.01 * rates[None]
    assert any(m.name == "retransmits" and m.flow is None for m in run.metrics)
    # The router's CPU, per core and with softirq, sampled on the router board.
    cores = {s.key for s in run.series if s.name == "cpu.softirq" and s.node == "router"}
    assert len(cores) >= 2, cores
    # Each flow left from its own client port, as pinned, on the client board.
    ports = sorted(json.loads(r.data)["start"]["connected"][0]["local_port"]
                   for r in store_raw(db) if r.name.endswith(" iperf3"))
    assert ports == [50001, 50002, 50003, 50004]
    # Everything the lab changed is back: the ends' routes, the router's forwarding.
    assert "192.168.10.0/24" not in boards["client"].exec("ip", "route").stdout
    assert "192.168.30.0/24" not in boards["server"].exec("ip", "route").stdout
    forward = boards["router"].exec("cat", "/proc/sys/net/ipv4/ip_forward").stdout.strip()
    assert forward == "0"
    # The pinned ports were reserved on the client for the lab's life, and are free again.
    reserved = boards["client"].exec("cat", "/proc/sys/net/ipv4/ip_local_reserved_ports")
    assert reserved.stdout.strip() == ""
    for board in boards.values():
        assert not board.pids()


def store_raw(db: Path) -> list[RawOutput]:
    with open_store(str(db)) as store:
        return list(store.get_run(1, raw=True).raw)
