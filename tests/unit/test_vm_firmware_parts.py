"""A firmware image's VM without booting one: the lab file's `vm = { image = ... }` and its
errors, the plan's NIC names after the firmware's own first NIC, QEMU's command line
(the disk copy-on-write, SeaBIOS, the user network made the management subnet), the
configuration steps BusyBox can run, and the labels of a run on it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.lab.devices.labels import device_labels
from hoplab.lab.plan import plan_lab
from hoplab.lab.vm import firmware, qemu
from hoplab.lab.vm.script import failed, script
from tests.unit.test_vm_spec import _lab

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFJgGzXV7qXwtIVSkUdnjXeSzHjcqyaavjJy+ziFMXqq"
LAB = f"""
name = "f"
[nodes.h1]
[nodes.r1]
vm = {{ image = "owrt.img", identity = "keys/id", host_key = "{KEY} root@OpenWrt" }}
[nodes.h2]
[[links]]
between = ["h1", "r1"]
[[links]]
between = ["r1", "h2"]
"""


def test_an_image_table_declares_a_firmware_vm(tmp_path: Path) -> None:
    r1 = _lab(tmp_path, LAB).node("r1")
    assert r1.kind == "vm" and r1.vm is not None
    assert (r1.vm.kernel, r1.vm.image) == (None, str(tmp_path / "owrt.img"))
    assert (r1.vm.user, r1.vm.identity) == ("root", str(tmp_path / "keys" / "id"))
    # The key without its comment; OpenWrt's LAN address unless the file says.
    assert (r1.vm.host_key, r1.vm.management) == (KEY, "192.168.1.1/24")


@pytest.mark.parametrize(("value", "key", "says"), [
    ('{ kernel = "debian:6.12.1-amd64", image = "a.img" }', "nodes.r1.vm", "one of the two"),
    ('{ image = "a.img", modules = "m" }', "nodes.r1.vm.modules", "goes with a kernel"),
    ('{ kernel = "debian:6.12.1-amd64", user = "root" }', "nodes.r1.vm.user",
     "a firmware image's"),
    ('{ image = "a.img", host_key = "AAAA" }', "nodes.r1.vm.host_key", "public key line"),
    ('{ image = "a.img", management = "192.168.1.0/24" }', "nodes.r1.vm.management",
     "IPv4 address and prefix"),
    ('{ image = "a.img", management = "192.168.1.1/30x" }', "nodes.r1.vm.management",
     "IPv4 address and prefix"),
    ('{ image = "a.img", user = "-oProxyCommand=x" }', "nodes.r1.vm.user", "not a user name"),
    ('{ vcpus = 2 }', "nodes.r1.vm", 'missing required key "kernel"'),
])
def test_a_bad_image_value_names_its_line_and_key(tmp_path: Path, value: str, key: str,
                                                 says: str) -> None:
    with pytest.raises(SpecError) as err:
        _lab(tmp_path, f'name = "f"\n[nodes.r1]\nvm = {value}\n')
    assert err.value.key == key and err.value.line == 3 and says in str(err.value)


def test_the_lab_nics_come_after_the_firmwares_own_first_nic(tmp_path: Path) -> None:
    plan = plan_lab(_lab(tmp_path, LAB))
    assert [(i.name, i.kind) for i in plan.node("r1").ifaces] == \
        [("eth1", "guest"), ("eth2", "guest")]
    # The namespaces' ends are named as ever.
    assert [i.name for i in plan.node("h1").ifaces] == ["eth0"]


def test_qemu_boots_the_image_copy_on_write_with_the_management_subnet() -> None:
    b = qemu.Boot("r1", None, None, 1, "256M", "tcg", 2222, Path("/labs/x/vm/r1"),
                  nics=(qemu.Nic("02:aa:00:00:00:01", "eth1", fd=7),),
                  firmware=qemu.Firmware(Path("/img/owrt.img"), "192.168.1.1/24"))
    argv = qemu.argv(b)
    assert "-kernel" not in argv and "-virtfs" not in argv and "-bios" not in argv
    assert argv[argv.index("-drive") + 1] == "file=/img/owrt.img,format=raw,if=ide,snapshot=on"
    net = [a for a in argv if a.startswith("user,")]
    assert net == ["user,id=mgmt,net=192.168.1.0/24,host=192.168.1.2,dhcpstart=192.168.1.253,"
                   "hostfwd=tcp:127.0.0.1:2222-192.168.1.1:22"]
    # The management NIC first (the firmware's eth0), then the lab's.
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "-device"]
    assert devices[1:] == ["virtio-net-pci,netdev=mgmt,mac=02:00:00:00:00:01",
                           "virtio-net-pci,netdev=n0,mac=02:aa:00:00:00:01"]
    # Another address: this machine takes one that is not the firmware's.
    other = qemu.argv(qemu.Boot("r1", None, None, 1, "256M", "tcg", 2222, Path("/d"),
                                firmware=qemu.Firmware(Path("/i"), "10.9.0.2/29")))
    assert "user,id=mgmt,net=10.9.0.0/29,host=10.9.0.1,dhcpstart=10.9.0.5," \
           "hostfwd=tcp:127.0.0.1:2222-10.9.0.2:22" in other


def test_the_steps_busybox_runs(tmp_path: Path) -> None:
    """The renaming by MAC and the ip lines as BusyBox's ip takes them, run by a real
    shell over stand-ins for /sys and ip."""
    steps = firmware.lines("ip", ["link set eth1 up", "addr add fd00::1/64 dev eth1 nodad",
                                  "route add 10.0.0.0/24 via 10.1.0.1 dev eth1 proto static"],
                           "ip")
    assert [s.argv for s in steps] == [
        ["ip", "link", "set", "eth1", "up"], ["ip", "addr", "add", "fd00::1/64", "dev", "eth1"],
        ["ip", "route", "add", "10.0.0.0/24", "via", "10.1.0.1", "dev", "eth1"]]
    names = firmware.rename([("02:aa:00:00:00:01", "eth1"), ("02:aa:00:00:00:02", "eth2")])
    # Through temporary names: the firmware may have named them the other way round.
    assert [s.argv[-1] for s in names] == ["hoplab0", "hoplab1", "eth1", "eth2"]


def test_a_missing_nic_or_tool_fails_its_step_by_name() -> None:
    steps = [*firmware.rename([("02:aa:00:00:00:09", "eth1")]), firmware.need("tc", "tc")]
    done = subprocess.run(["sh", "-c", script(steps)], capture_output=True, text=True,
                          check=False)
    where = failed(done.stderr)
    assert done.returncode != 0 and where is not None
    assert where[0] == 0 and "no NIC with MAC 02:aa:00:00:00:09" in where[1]


def test_busybox_tc_is_not_enough(tmp_path: Path) -> None:
    """`need("tc")` asks for iproute2's tc: BusyBox's applet answers -V with its usage."""
    fake = tmp_path / "tc"
    fake.write_text("#!/bin/sh\necho 'BusyBox v1.35.0 multi-call binary.'\n")
    fake.chmod(0o755)
    done = subprocess.run(["sh", "-c", script([firmware.need("tc", "its own kernel's tc")])],
                          capture_output=True, text=True, check=False,
                          env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert done.returncode == 127
    assert "no iproute2 tc" in done.stderr and "tc-full" in done.stderr


def test_a_run_on_a_firmware_is_labelled_with_its_firmware(tmp_path: Path) -> None:
    lab = _lab(tmp_path, LAB)
    facts = {"r1": {"kernel": "5.15.167", "firmware": "OpenWrt 23.05.5 r24106"}}
    assert device_labels(lab, facts) == {"kernel": "5.15.167",
                                         "firmware": "OpenWrt 23.05.5 r24106"}
