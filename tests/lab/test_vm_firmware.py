"""A router's firmware booted from its own disk image (`vm = { image = ... }`,
docs/vm.md): the stand-in image of tests/helpers/firmware.py (OpenWrt's cannot be
downloaded here) boots from its own boot sector under SeaBIOS, with no kernel, share or
console line from hoplab. hoplab reaches its SSH server at OpenWrt's LAN address,
192.168.1.1, through QEMU's user network, names its lab NICs by their MACs and
addresses them with BusyBox's ip, and the lab's traffic goes through it.

Known answers:
- A run through it names its kernel (uname -r) and its firmware (/etc/openwrt_release)
  in the run's metadata and labels, as for a device.
- Bulk TCP through it, the client's side shaped to 20 Mbit/s: goodput within 2 % of
  the payload rate, 20 x 1448 / 1514 = 19.13 Mbit/s (the firmware forwards it whole).
- A host key the lab file gives that the firmware does not have: lab up refuses it.
- Shaping asked of the firmware's own end, where it has only BusyBox's tc applet
  (which cannot set a qdisc): lab up says so.
Each leaves no QEMU, namespace or record behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.lab.where import record_path
from hoplab.store import open_store
from tests.helpers import firmware
from tests.helpers.lab import (
    HOPLAB,
    hoplab,
    lab_namespaces,
    new_lab_name,
    payload_mbit,
    remove_lab,
)
from tests.lab.test_vm import lab_qemus

# The tests that assert no rate run two at a time (`pairs`, tests/helpers/alone.py); the
# one that does, alone.
pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                                 reason="qemu-system-x86 is not installed"),
              pytest.mark.skipif(bool(firmware.missing()),
                                 reason="the stand-in image needs syslinux, mtools and "
                                        "dosfstools (make setup)")]

RELEASE = firmware.KERNEL.removeprefix("debian:")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vm" / "firmware.toml"
PAYLOAD_MBIT = payload_mbit(20)  # 19.13


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose ~/.ssh/id_ed25519 is the key the stand-in images let in, as the
    example's lab file names it."""
    d = tmp_path_factory.mktemp("home")
    (d / ".ssh").mkdir(mode=0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(d / ".ssh" / "id_ed25519")], check=True, capture_output=True)
    return d


@pytest.fixture(scope="module")
def image(home: Path, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[Path, Path, str]]:
    """(the image, the key it lets in, its host key line)."""
    d = tmp_path_factory.mktemp("firmware")
    key = home / ".ssh" / "id_ed25519"
    img, host_key = firmware.build(d, key.with_suffix(".pub").read_text())
    yield img, key, host_key


def _lab(d: Path, name: str, image: tuple[Path, Path, str], extra: str = "",
         r_end: str = "") -> Path:
    img, key, _ = image
    f = d / "lab.toml"
    f.write_text(
        f'name = "{name}"\n[addressing]\nipv6 = false\n[nodes.client]\n[nodes.r]\n'
        f'vm = {{ image = "{img}", identity = "{key}", vcpus = 2, memory = "256M"{extra} }}\n'
        f'[nodes.server]\n[[links]]\nbetween = ["client", "r"]\n'
        f'forward = {{ rate = "20mbit" }}\n[[links]]\nbetween = ["r", "server"]\n{r_end}')
    return f


def _nothing_left(name: str) -> None:
    assert not lab_qemus(name)
    assert lab_namespaces(name) == set()
    assert not Path(record_path(name)).exists()


# Alone: beside another test (a CI run, docs/testing.md) TCP through it read 17.76
# Mbit/s against 19.13 within 2 %.
@pytest.mark.alone
def test_a_run_through_the_firmware_names_it_and_forwards_at_the_shaped_rate(
        image: tuple[Path, Path, str], tmp_path: Path) -> None:
    name = new_lab_name()
    _lab(tmp_path, name, image)
    (tmp_path / "exp.toml").write_text(
        'lab = "lab.toml"\n[[tests]]\nname = "bulk"\nkind = "tcp"\nfrom = "client"\n'
        'to = "server"\nduration = "4s"\n')
    db = tmp_path / "runs.db"
    try:
        proc = hoplab("run", str(tmp_path / "exp.toml"), "--db", str(db), "--json",
                      "--lab-name", name, timeout=600)
        assert proc.returncode == 0, proc.stderr
        (run,) = json.loads(proc.stdout)["runs"]
        assert run["status"] == "ok", run["error"]
        with open_store(str(db)) as store:
            rec = store.get_run(run["id"])
    finally:
        remove_lab(name)
    _nothing_left(name)
    r = rec.metadata["nodes"]["r"]
    assert r["kernel"] == RELEASE
    assert r["firmware"] == "OpenWrt 23.05.5 (hoplab stand-in)"
    assert rec.labels["firmware"] == "OpenWrt 23.05.5 (hoplab stand-in)"
    assert rec.labels["kernel"] == RELEASE
    goodput = rec.metric("goodput")
    assert goodput is not None and abs(goodput / 1e6 / PAYLOAD_MBIT - 1) <= 0.02, goodput
    vm = rec.metadata["lab"]["nodes"]["r"]["vm"]
    assert (vm["release"], vm["kernel"]) == (RELEASE, f"image:{image[0]}")


@pytest.mark.pairs
def test_a_host_key_the_firmware_does_not_have_is_refused(
        image: tuple[Path, Path, str], tmp_path: Path) -> None:
    name = new_lab_name()
    # Another key's line: what a lab file that names the wrong image would give.
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True, capture_output=True)
    pub = " ".join((tmp_path / "other.pub").read_text().split()[:2])
    lab = _lab(tmp_path, name, image, extra=f', host_key = "{pub}"')
    try:
        proc = hoplab("lab", "up", str(lab), "--name", name, timeout=300)
    finally:
        remove_lab(name)
    assert proc.returncode != 0
    assert "host key" in proc.stderr.lower(), proc.stderr
    _nothing_left(name)


@pytest.mark.pairs
def test_shaping_the_firmwares_own_end_without_tc_says_so(
        image: tuple[Path, Path, str], tmp_path: Path) -> None:
    name = new_lab_name()
    lab = _lab(tmp_path, name, image, r_end='forward = { rate = "10mbit" }\n')
    try:
        proc = hoplab("lab", "up", str(lab), "--name", name, timeout=300)
    finally:
        remove_lab(name)
    assert proc.returncode != 0
    assert "VM r: its own kernel's tc needs tc" in proc.stderr, proc.stderr
    assert "the firmware has no iproute2 tc" in proc.stderr, proc.stderr
    _nothing_left(name)


@pytest.mark.pairs
def test_the_example_compares_two_builds(home: Path, image: tuple[Path, Path, str],
                                         tmp_path: Path) -> None:
    """examples/vm/firmware.toml as a user runs it, on two stand-in builds (23.05.5, and
    24.10.0 made the same way): a run through each, each labelled with its firmware,
    and the report comparing them."""
    newer, _ = firmware.build(tmp_path / "newer", (home / ".ssh" / "id_ed25519.pub")
                              .read_text(), release="24.10.0")
    name = new_lab_name()
    db = tmp_path / "runs.db"
    images = f'["{image[0]}", "{newer}"]'
    try:
        done = subprocess.run(
            [*HOPLAB, "run", str(EXAMPLE), "--set", f"lab.nodes.r.vm.image={images}",
             "--set", "duration=2s", "--repeat", "1", "--db", str(db), "--lab-name", name],
            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(home)}, cwd=tmp_path, check=False)
    finally:
        remove_lab(name)
    _nothing_left(name)
    assert done.returncode == 0, done.stderr[-3000:]
    with open_store(str(db)) as store:
        runs = store.list_runs({})
    assert sorted((r.status, r.labels["firmware"]) for r in runs) == [
        ("ok", "OpenWrt 23.05.5 (hoplab stand-in)"), ("ok", "OpenWrt 24.10.0 (hoplab stand-in)")]
    assert all(r.metrics.get("goodput", 0) > 0 for r in runs)
    assert "report: A = " in done.stdout, done.stdout
