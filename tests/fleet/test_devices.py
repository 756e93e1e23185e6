"""A device shared by two benches serves one run at a time: an emulated router
(tests/helpers/devices.py) cabled to one NIC of this machine, which both benches' labs
use; its lock holds the second bench's run until the first's lab is down, so every
run is ok and no two runs' stored times overlap."""

from __future__ import annotations

import itertools
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.store import open_store
from tests.fleet.benches import bench, bench_state, until
from tests.helpers.device_labs import configure, nic_names
from tests.helpers.devices import Farm, farm
from tests.helpers.lab import hoplab, new_lab_name

pytestmark = [pytest.mark.root, pytest.mark.slow]

LAB = '''name = "dev"
[nodes.client]
[nodes.router]
ssh = "root@{address}"
ssh_options = {{ identity = "{identity}", known_hosts = "{known_hosts}" }}
[[links]]
between = ["client", "router"]
attach = {{ client = "{nic}" }}
addresses = {{ client = ["192.168.7.2/24"], router = ["192.168.7.1"] }}
'''

EXPERIMENT = '''lab = "lab.toml"
repeat = 3
pause = "0s"
[[tests]]
name = "p"
kind = "ping"
from = "client"
to = "router"
duration = "1s"
'''


@pytest.fixture
def devices(tmp_path: Path) -> Iterator[Farm]:
    with farm(tmp_path / "farm") as f:
        yield f


def test_a_device_shared_by_two_benches_serves_one_run_at_a_time(
        db: str, devices: Farm, tmp_path: Path) -> None:
    nic = nic_names("c")["c"]
    router = devices.add("linux-board")
    router.cable("lan0", nic)
    configure(router, ["ip", "addr", "add", "192.168.7.1/24", "dev", "lan0"],
              ["ip", "link", "set", "lan0", "up"])
    (tmp_path / "lab.toml").write_text(LAB.format(
        address=router.address, identity=devices.identity, known_hosts=devices.known_hosts,
        nic=nic))
    experiment = tmp_path / "exp.toml"
    experiment.write_text(EXPERIMENT)
    a, b = new_lab_name(), new_lab_name()
    try:
        with bench(db, a) as bench_a, bench(db, b) as bench_b:
            until("both benches", lambda: bench_state(db, a) and bench_state(db, b))
            got = hoplab("submit", str(experiment), "--db", db, "--wait", timeout=180)
            for proc in (bench_a, bench_b):
                proc.send_signal(signal.SIGTERM)
            for proc in (bench_a, bench_b):
                proc.communicate(timeout=60)
        assert got.returncode == 0, got.stdout + got.stderr
        with open_store(db, read_only=True) as store:
            runs = store.list_runs({"test": "p"}, figures=False)
        assert len(runs) == 3 and {r.status for r in runs} == {"ok"}
        spans = sorted((r.started_at, r.started_at + r.duration_s) for r in runs)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start, spans
    finally:
        hoplab("clean", a, b)
