"""examples/devices/router-throughput.toml against an emulated router: RFC 2544
throughput through a device over SSH, the generator and receiver local namespaces on
the host NICs cabled to it.

The router shapes its egress towards the server with tbf at R = 20 Mbit/s, a bucket of
B = 15140 bytes and a queue of L = 30280 bytes, set by a setup command on the device.
tbf counts a frame without its FCS: an RFC 2544 frame of 1518 bytes is 1514 bytes to
it, so the router forwards R / (1514 x 8) = 1651.3 frames/s. A trial of T seconds hides
what the full bucket and the queue hold, (B + L) / 1514 = 30 frames, so the no-drop
rate found with 2 s trials is 1651.3 + 30 / 2 = 1666.3 frames/s (docs/kinds.md), to the
search's precision (0.5 %). A 1000/1024 slip reads 4.6 % off; counting the FCS would read
1646.9 + 15.0 (-0.3 %), inside that precision, which this test does not tell. The bound
is 2 %: the answer is the achieved rate of the highest pass, up to the precision below
the lowest failure and up to the precision below the rate asked. 2 % still tells a
1000/1024 slip.

The bucket is 10 frames, not 2. tbf sends a frame when its bucket holds enough tokens,
woken by a timer: a timer late by more than the bucket's time loses that time for good,
as the bucket cannot hold more. With 2 frames (1.2 ms at R), on this machine, a
hypervisor's guest whose timers fire late under load, the router forwarded less than R:
5fbd352's fresh-clone run lost 32 frames in 2 s at 1,651.1 frames/s (R itself) and 1 at
1,629.0, and read 1,628.4 frames/s, 2.03 % low; 669350f's lost 3 at 1,652.8 (1.02 %
low). The emulated router is a namespace of this machine; its shaper's timers are this
machine's. 10 frames (6 ms) absorb what was seen.

Each trial waits RFC 2544's 2 s (section 23) for late frames before the next, as the
example does. With 0.5 s, the trial after the first (at the generator's ceiling, a flood
the router drops 99.7 % of) lost 1 to 9 frames at 1,616 to 1,632 frames/s, below the
shaper's rate, in 2 of 14 runs beside one to three busy loops (and in one CI run), and
the answer came 2.0 to 2.8 % low; with 2 s, 8 runs beside three read 1,660.6 to 1,661.6.
Beside the pool's other tests it failed in two fresh-clone runs of two on 2026-11-30
(1.3 % low beside test_cli_stores' runs with 3.5 % of a core stolen, and once with 9 %):
it runs `alone`.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.store.store import open_store
from tests.helpers.device_labs import EXAMPLES, adapt, cable_router, nic_names
from tests.helpers.devices import Device, Farm, farm
from tests.helpers.lab import HOPLAB, lab_namespaces

pytestmark = [pytest.mark.root, pytest.mark.slow]

RATE_BPS = 20_000_000
BUCKET, QUEUE = 15140, 30280
TRIAL_S = 2.0
DRAIN_S = 2.0   # RFC 2544 section 23's wait after a trial: see above
FRAME = 1518 - 4
WANT_FPS = RATE_BPS / (FRAME * 8) + (BUCKET + QUEUE) / FRAME / TRIAL_S

SHAPED = (f'setup = [["tc", "qdisc", "replace", "dev", "rt1", "root", "tbf", "rate", '
          f'"{RATE_BPS}bit", "burst", "{BUCKET}", "limit", "{QUEUE}"]]\n'
          f'teardown = [["tc", "qdisc", "del", "dev", "rt1", "root"]]\n')


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


@pytest.mark.alone
def test_ndr_through_a_router_over_ssh_is_its_shaped_frame_rate(
        devices: Farm, tmp_path: Path, lab_name: str) -> None:
    nics = nic_names("hl-c0", "hl-s0")
    router = cable_router(devices, nics)
    text = adapt((EXAMPLES / "router-dut.toml").read_text(), {"root@10.99.0.2": router}, nics)
    head, tail = text.replace('name = "dut"', f'name = "{lab_name}"').split("[[links]]", 1)
    (tmp_path / "router-dut.toml").write_text(head.rstrip() + "\n" + SHAPED + "\n[[links]]"
                                              + tail)
    exp = tmp_path / "router-throughput.toml"
    exp.write_text((EXAMPLES / "router-throughput.toml").read_text())
    db = tmp_path / "runs.db"
    got = subprocess.run([*HOPLAB, "run", str(exp), "--db", str(db), "--json",
                          "--lab-name", lab_name, "--set", f"trial={TRIAL_S:g}s",
                          "--set", f"drain={DRAIN_S:g}s", "--set", "frame_sizes=[1518]"],
                         capture_output=True, text=True, timeout=600, check=False)
    assert lab_namespaces(lab_name) == set(), "the run left namespaces behind"
    assert got.returncode == 0, got.stderr
    (run,) = json.loads(got.stdout)["runs"]
    assert run["status"] == "ok", run["error"]
    with open_store(str(db)) as store:
        rec = store.get_run(run["id"])
    figures = {m.name: m.value for m in rec.metrics
               if m.key == "1518" and m.flow is None and m.node is None}
    assert abs(figures["ndr_fps"] / WANT_FPS - 1) <= 0.02, (figures, WANT_FPS)
    assert figures["generator_limited"] == 0.0
    # The device's model and firmware label the run; its CPU was sampled over SSH.
    assert "device" in rec.labels and "firmware" in rec.labels, rec.labels
    assert any(s.node == "router" and s.name.startswith("cpu") for s in rec.series)
    # The shaper was the device's, and its teardown command took it away again.
    assert "tbf" not in router.exec("tc", "qdisc", "show", "dev", "rt1").stdout


def test_a_killed_search_leaves_no_counter_on_the_device_after_clean(
        devices: Farm, tmp_path: Path, lab_name: str) -> None:
    """Frames to the router itself: its nft counter table is the device's. hoplab is
    SIGKILLed in the middle of the search; `hoplab clean LAB` takes the table away."""
    nics = nic_names("hl-c0", "hl-s0")
    router = cable_router(devices, nics)
    text = adapt((EXAMPLES / "router-dut.toml").read_text(), {"root@10.99.0.2": router}, nics)
    (tmp_path / "router-dut.toml").write_text(
        text.replace('name = "dut"', f'name = "{lab_name}"'))
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "router-dut.toml"\n[[tests]]\nname = "ndr"\nkind = "throughput"\n'
                   'from = "client"\nto = "router"\nframe_sizes = [1518]\ntrial = "30s"\n')
    with subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(tmp_path / "runs.db"),
                           "--lab-name", lab_name], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL) as proc:
        deadline = time.monotonic() + 120
        while "hoplab_rx_0" not in router.exec("nft", "list", "tables").stdout:
            assert proc.poll() is None and time.monotonic() < deadline, "no counter table"
            time.sleep(0.1)
        proc.kill()
    assert "hoplab_rx_0" in router.exec("nft", "list", "tables").stdout
    done = subprocess.run([*HOPLAB, "clean", lab_name], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "hoplab_rx_0" not in router.exec("nft", "list", "tables").stdout
    assert lab_namespaces(lab_name) == set()
    assert not any("iperf3" in cmd for cmd in _commands(router)), "iperf3 left on the device"


def _commands(dev: Device) -> list[str]:
    out = []
    for pid in dev.pids():
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
        except OSError:
            continue
    return out
