"""Known answers through an emulated router, and a device lost mid-test.

The router of examples/devices/router-dut.toml shapes its egress towards the server to
40 Mbit/s with tbf, set by a setup command on the device. tbf counts what the qdisc
sees on a veth: whole Ethernet frames without preamble, FCS or gap (a GSO super-frame
as its segments, each with its headers). A full TCP segment is a 1514-byte frame with
1448 bytes of payload (1500 MTU - 20 IP - 20 TCP - 12 timestamps), so the goodput is
40 * 1448 / 1514 = 38.26 Mbit/s.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.store.store import open_store
from tests.helpers.device_labs import EXAMPLES, adapt, cable_router, nic_names
from tests.helpers.devices import Device, Farm, farm
from tests.helpers.lab import HOPLAB

pytestmark = [pytest.mark.root, pytest.mark.slow]

RATE_BPS = 40e6
TCP_PAYLOAD_BPS = RATE_BPS * 1448 / 1514  # 38.26 Mbit/s

SHAPED = '''setup = [["tc", "qdisc", "replace", "dev", "rt1", "root", "tbf", "rate", "40mbit",
          "burst", "80kb", "latency", "100ms"]]
teardown = [["tc", "qdisc", "del", "dev", "rt1", "root"]]
'''

TESTS = '''lab = "router-dut.toml"
seed = 3
repeat = {repeat}

[[tests]]
name = "bulk"
kind = "tcp"
from = "client"
to = "server"
flows = 2
duration = "{duration}"
samplers = {{ nodes = ["router"], kinds = ["cpu", "ifaces", "tcp"] }}
'''


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


def _files(devices: Farm, tmp_path: Path, lab_name: str, *, repeat: int, duration: str
           ) -> tuple[Path, Device]:
    nics = nic_names("hl-c0", "hl-s0")
    router = cable_router(devices, nics)
    text = adapt((EXAMPLES / "router-dut.toml").read_text(), {"root@10.99.0.2": router}, nics)
    head, tail = text.replace('name = "dut"', f'name = "{lab_name}"').split("[[links]]", 1)
    (tmp_path / "router-dut.toml").write_text(head.rstrip() + "\n" + SHAPED + "\n[[links]]"
                                              + tail)
    exp = tmp_path / "exp.toml"
    exp.write_text(TESTS.format(repeat=repeat, duration=duration))
    return exp, router


def test_a_device_shaping_to_40_mbit_gives_the_computed_goodput(
        devices: Farm, tmp_path: Path, lab_name: str) -> None:
    exp, router = _files(devices, tmp_path, lab_name, repeat=1, duration="6s")
    db = tmp_path / "runs.db"
    got = subprocess.run([*HOPLAB, "run", str(exp), "--db", str(db), "--lab-name", lab_name],
                         capture_output=True, text=True, timeout=300, check=False)
    assert got.returncode == 0, got.stderr
    with open_store(str(db)) as store:
        run = store.get_run(1)
    assert run.status == "ok", run.error
    goodput = next(m.value for m in run.metrics if m.name == "goodput" and m.flow is None)
    assert abs(goodput - TCP_PAYLOAD_BPS) <= TCP_PAYLOAD_BPS * 0.025, (goodput, TCP_PAYLOAD_BPS)
    # The shaper was the device's, and its teardown command took it away again.
    assert "tbf" not in router.exec("tc", "qdisc", "show", "dev", "rt1").stdout


def test_ssh_server_stopped_mid_test_fails_that_run_alone(
        devices: Farm, tmp_path: Path, lab_name: str) -> None:
    # Two runs: the one cut short, and the next, which must not suffer for it.
    exp, router = _files(devices, tmp_path, lab_name, repeat=2, duration="5s")
    db = tmp_path / "runs.db"
    with subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(db), "--lab-name", lab_name],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as proc:
        # The first run's sampler lives on the router: stop the device's SSH server (and
        # everything on it, as a power cut would) half way through, then bring it back.
        deadline = time.monotonic() + 60
        while not _sampling(router):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        time.sleep(2.0)
        router.kill_server()
        time.sleep(1.0)
        router.start_server()
        _, err = proc.communicate(timeout=300)
    # 1: a run failed; the experiment went on.
    assert proc.returncode == 1, err
    with open_store(str(db)) as store:
        runs = [store.get_run(i) for i in (1, 2)]
    assert [r.status for r in runs] == ["failed", "ok"], [r.error for r in runs]
    assert runs[0].error is not None and "router" in runs[0].error, runs[0].error


def _sampling(dev: Device) -> bool:
    """Whether the device's sampler loop runs (an outage before it, during the lab's
    set-up, is survived by reconnecting: it would fail no run)."""
    for pid in dev.pids():
        try:
            if b"HL_END" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False
