"""VM nodes without booting one: the lab file's `vm` table and its errors, the node
kind the registry gives it, the plan's NICs and taps, QEMU's command line, the tap
MACs, the initramfs archive and which directions of a link this machine shapes."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.lab.plan import plan_lab
from hoplab.lab.requirements import for_host
from hoplab.lab.vm import initramfs, qemu, taps
from hoplab.lab.vm.kernel import Kernel, image_release
from hoplab.nodes import registry
from hoplab.spec import load_lab
from hoplab.spec.model import Direction

LAB = """
name = "v"
[nodes.h1]
[nodes.r1]
vm = { kernel = "debian:6.12.100+deb12-amd64", vcpus = 4, memory = "1G" }
[nodes.r2]
vm = { kernel = "bzImage", modules = "mods/6.9.0" }
[[links]]
between = ["h1", "r1"]
forward = { rate = "10mbit" }
reverse = { rate = "20mbit", qdisc = "fq_codel" }
[[links]]
between = ["r1", "r2"]
"""


def _lab(tmp_path: Path, text: str = LAB):  # type: ignore[no-untyped-def]
    f = tmp_path / "lab.toml"
    f.write_text(text)
    return load_lab(f)


def test_a_vm_table_declares_a_vm_node(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    r1, r2 = lab.node("r1"), lab.node("r2")
    assert (r1.kind, lab.node("h1").kind) == ("vm", "netns")
    assert r1.vm is not None and (r1.vm.vcpus, r1.vm.memory_mib) == (4, 1024)
    # Paths are the lab file's directory's.
    assert r2.vm is not None and r2.vm.kernel == str(tmp_path / "bzImage")
    assert r2.vm.modules == str(tmp_path / "mods" / "6.9.0")
    kind = registry.kind("vm")
    assert (kind.builds, kind.links, kind.transport, kind.local) == \
        ("qemu", "guest", "ssh", False)
    assert registry.declared(["vm"]) == "vm" and registry.declared([]) == "netns"


@pytest.mark.parametrize(("value", "key", "says"), [
    ('{ kernel = "debian:6.12 x" }', "nodes.r1.vm.kernel", "not a Debian kernel release"),
    ('{ kernel = "debian:6.12.1-amd64", vcpus = 0 }', "nodes.r1.vm.vcpus", "1 to 64"),
    ('{ kernel = "debian:6.12.1-amd64", memory = "64M" }', "nodes.r1.vm.memory", "128 MiB"),
    ('{ kernel = "debian:6.12.1-amd64", cpu = "250%" }', "nodes.r1.vm.cpu", "share"),
    ('{ vcpus = 2 }', "nodes.r1.vm", 'missing required key "kernel"'),
    ('{ kernel = "debian:6.12.1-amd64", disk = "x" }', "nodes.r1.vm.disk", "unknown key"),
])
def test_a_bad_vm_value_names_its_line_and_key(tmp_path: Path, value: str, key: str,
                                              says: str) -> None:
    with pytest.raises(SpecError) as err:
        _lab(tmp_path, f'name = "v"\n[nodes.r1]\nvm = {value}\n')
    assert err.value.key == key and err.value.line == 3 and says in str(err.value)


def test_vm_and_ssh_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not both"):
        _lab(tmp_path, 'name = "v"\n[nodes.r1]\nssh = "root@192.0.2.1"\n'
                       'vm = { kernel = "debian:6.12.1-amd64" }\n')


def test_the_plan_gives_a_vm_nics_and_its_neighbour_a_tap(tmp_path: Path) -> None:
    plan = plan_lab(_lab(tmp_path))
    assert [(i.name, i.kind) for i in plan.node("h1").ifaces] == [("eth0", "tap")]
    assert [(i.name, i.kind) for i in plan.node("r1").ifaces] == [("eth0", "guest"),
                                                                  ("eth1", "guest")]
    # Routed through like any router: h1 reaches r2's subnet through r1.
    assert plan.path("h1", "r2") == ["h1", "r1", "r2"]


def test_this_machine_shapes_only_what_its_namespace_sends(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    host = for_host(lab, lab.links[0])
    # h1 -> r1 is h1's tap egress (this kernel's tc); r1 -> h1 is the guest's own.
    assert host.forward.rate_bps == 10_000_000 and host.reverse == Direction()
    assert for_host(lab, lab.links[1]).forward == Direction()


def test_qemu_command_line(tmp_path: Path) -> None:
    k = Kernel("6.12.1", tmp_path / "bzImage", tmp_path / "mods", "debian:6.12.1")
    b = qemu.Boot("r1", k, tmp_path / "initrd.gz", 2, "512M", "tcg", 40022, tmp_path / "d",
                  (qemu.Nic("02:00:00:00:00:02", "eth0", fd=7),
                   qemu.Nic("02:00:00:00:00:03", "eth1", udp=(50001, 50002))))
    argv = qemu.argv(b, ctl=qemu.Control(8, 9))
    text = " ".join(argv)
    assert argv[argv.index("-accel"):argv.index("-accel") + 2] == ["-accel", "tcg,thread=multi"]
    assert "hostfwd=tcp:127.0.0.1:40022-:22" in text
    assert "tap,id=n0,fd=7" in text and "mac=02:00:00:00:00:02" in text
    assert "socket,id=n1,udp=127.0.0.1:50002,localaddr=127.0.0.1:50001" in text
    assert f"path={tmp_path / 'mods'},mount_tag=modules" in text
    # The console: a socket pair's end (hoplab writes the go line), logged to a file.
    assert argv[argv.index("-serial") + 1] == "chardev:console"
    assert f"socket,id=console,fd=8,server=off,logfile={tmp_path / 'd' / 'serial.log'}" \
        in argv
    assert "socket,id=qmp,fd=9,server=off" in argv and "-incoming" not in argv
    restored = qemu.argv(replace(b, restore=tmp_path / "s.vmstate"), ctl=qemu.Control(8, 9, 10))
    assert restored[restored.index("-incoming") + 1] == "fd:10"


def test_tap_macs_are_stable_and_locally_administered() -> None:
    a = taps.mac("lab", "r1", 0)
    assert a == taps.mac("lab", "r1", 0) != taps.mac("lab", "r1", 1)
    assert int(a.split(":")[0], 16) & 0x02 and not int(a.split(":")[0], 16) & 0x01


def test_the_initramfs_is_a_newc_archive(tmp_path: Path) -> None:
    data = initramfs.cpio([("init", 0o100755, b"#!/bin/sh\n"), ("bin", 0o040755, b"")])
    assert data.startswith(b"070701") and data.endswith(b"\0") and len(data) % 4 == 0
    assert b"init\0" in data and b"TRAILER!!!\0" in data
    out = tmp_path / "x.gz"
    out.write_bytes(gzip.compress(data))
    assert gzip.decompress(out.read_bytes()) == data


def test_a_bzimage_names_its_release(tmp_path: Path) -> None:
    header = bytearray(0x1000)
    header[0x202:0x206] = b"HdrS"
    header[0x20E:0x210] = (0x600 - 0x200).to_bytes(2, "little")
    header[0x600:0x620] = b"6.9.0-test (me@box) #1 SMP\0"
    (tmp_path / "bzImage").write_bytes(bytes(header))
    assert image_release(tmp_path / "bzImage") == "6.9.0-test"
