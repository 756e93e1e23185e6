"""Snapshots of booted guests (hoplab.lab.vm.snapshot, resume): one per kind of VM,
whatever lab or node it serves, and a new one when anything the guest's machine is made
of changes; the first VM of a kind without one makes it; a partial one a killed process
left is found by `hoplab clean`."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hoplab.lab.vm import qemu, resume, snapshot
from hoplab.lab.vm.kernel import Kernel

EXE = "/bin/true"


@pytest.fixture
def boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> qemu.Boot:
    monkeypatch.setenv("HOPLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(snapshot.ENV, raising=False)
    for name in ("vmlinux", "initrd.gz"):
        (tmp_path / name).write_bytes(b"x" * 100)
    (tmp_path / "mods").mkdir()
    k = Kernel("6.12.1", tmp_path / "bzImage", tmp_path / "mods", "debian:6.12.1",
               entry=tmp_path / "vmlinux")
    return qemu.Boot("r1", k, tmp_path / "initrd.gz", 2, "512M", "tcg", 40022,
                     tmp_path / "labs" / "a" / "vm" / "r1",
                     (qemu.Nic("02:00:00:00:00:02", "eth0", fd=7),
                      qemu.Nic("02:00:00:00:00:03", "eth1", udp=(50001, 50002))))


def test_what_differs_between_vms_of_a_kind_is_not_in_its_key(boot: qemu.Boot,
                                                              tmp_path: Path) -> None:
    other = replace(boot, node="r7", ssh_port=40999, dir=tmp_path / "labs" / "b" / "vm" / "r7",
                    nics=(qemu.Nic("02:aa:00:00:00:02", "wan", fd=12),
                          qemu.Nic("02:aa:00:00:00:03", "lan", udp=(1, 2))),
                    restore=tmp_path / "x.vmstate")
    assert snapshot.key(boot, EXE) == snapshot.key(other, EXE)


def test_what_the_guests_machine_is_made_of_is(boot: qemu.Boot, tmp_path: Path) -> None:
    base = snapshot.key(boot, EXE)
    assert snapshot.key(replace(boot, vcpus=1), EXE) != base
    assert snapshot.key(replace(boot, memory="256M"), EXE) != base
    assert snapshot.key(replace(boot, nics=boot.nics[:1]), EXE) != base
    assert snapshot.key(replace(boot, accel="kvm"), EXE) != base
    # A tap's end gives the guest offloads (vnet_hdr) a UDP socket's does not.
    swapped = (replace(boot.nics[0], fd=None, udp=(1, 2)), boot.nics[1])
    assert snapshot.key(replace(boot, nics=swapped), EXE) != base
    assert boot.kernel is not None
    assert snapshot.key(replace(boot, kernel=replace(boot.kernel, modules=None)), EXE) != base
    assert snapshot.key(boot, "/bin/sh") != base          # another QEMU
    # A kernel or initramfs rebuilt in place (a bisection's next commit).
    os.utime(tmp_path / "vmlinux", ns=(1, 1))
    assert snapshot.key(boot, EXE) != base
    again = snapshot.key(boot, EXE)
    (tmp_path / "initrd.gz").write_bytes(b"y" * 101)
    assert snapshot.key(boot, EXE) != again


def test_a_vm_resumes_only_from_a_snapshot_that_is_there(boot: qemu.Boot,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert snapshot.stored(boot, EXE) is None
    made = snapshot.path(snapshot.key(boot, EXE))
    made.parent.mkdir(parents=True)
    made.write_bytes(b"QEVM")
    assert snapshot.stored(boot, EXE) == made
    monkeypatch.setenv(snapshot.ENV, "0")          # every VM boots
    assert snapshot.stored(boot, EXE) is None
    firmware = replace(boot, kernel=None, firmware=qemu.Firmware(Path("/x.img"), "10.0.0.1/24"))
    monkeypatch.setenv(snapshot.ENV, "1")
    assert snapshot.stored(firmware, EXE) is None  # a firmware's own image boots itself


def _started() -> qemu.Started:
    return qemu.Started(subprocess.Popen([sys.executable, "-c", "pass"]), [], None)


def test_the_first_vm_of_a_kind_without_a_snapshot_makes_it(boot: qemu.Boot,
                                                            tmp_path: Path) -> None:
    same = replace(boot, node="r2")
    other = replace(boot, node="r3", vcpus=1)
    restored = replace(boot, node="r4", restore=tmp_path / "s.vmstate")
    started = [_started() for _ in range(4)]
    try:
        plan = resume.plan(list(zip([boot, same, other, restored], started, strict=True)), EXE)
        assert [p.make for p in plan] == [snapshot.key(boot, EXE), None,
                                          snapshot.key(other, EXE), None]
    finally:
        for s in started:
            s.proc.wait()


def test_partial_snapshots_of_killed_processes_are_leftovers(boot: qemu.Boot) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    d = snapshot.snapshot_dir()
    d.mkdir(parents=True)
    mine = snapshot.partial("k1")
    mine.write_bytes(b"")
    theirs = d / f".k2.{dead.pid}{snapshot.PARTIAL}"
    theirs.write_bytes(b"")
    (d / f"k3{snapshot.SUFFIX}").write_bytes(b"")
    assert snapshot.leftovers() == [theirs]


def test_only_the_most_recently_used_snapshots_are_kept(boot: qemu.Boot) -> None:
    d = snapshot.snapshot_dir()
    d.mkdir(parents=True)
    for i in range(5):
        (d / f"k{i}{snapshot.SUFFIX}").write_bytes(b"")
        os.utime(d / f"k{i}{snapshot.SUFFIX}", ns=(i * 10**9, i * 10**9))
    mine = snapshot.path(snapshot.key(boot, EXE))
    mine.write_bytes(b"")
    os.utime(mine, ns=(0, 0))                      # the oldest ...
    assert snapshot.stored(boot, EXE) == mine       # ... until a VM resumes from it
    removed = snapshot.prune(keep=3)
    assert sorted(p.name for p in removed) == [f"k{i}{snapshot.SUFFIX}" for i in range(3)]
    assert sorted(p.name for p in d.glob(f"*{snapshot.SUFFIX}")) == \
        sorted([mine.name, f"k3{snapshot.SUFFIX}", f"k4{snapshot.SUFFIX}"])


def _exited(argv: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    proc.wait()
    return proc


@pytest.mark.parametrize(("console", "argv", "restored", "said"), [
    # A kernel's oops before the checkpoint: booted again, naming it.
    ("[    1.858931] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n", ["true"], False,
     "its kernel oopsed ([    1.858931] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI)"),
    # QEMU's own fault.
    ("", ["sh", "-c", "kill -SEGV $$"], False, "QEMU crashed (SIGSEGV)"),
    # QEMU that exits of itself (a bad option, a power-off), or is killed: not again.
    ("", ["false"], False, ""),
    ("", ["sh", "-c", "kill -KILL $$"], False, ""),
    # Past the checkpoint, what dies is the lab's: not again.
    ("hoplab-checkpoint 2.1\n[    3.1] Oops: int3: 0000\n", ["true"], False, ""),
    # Restored from a snapshot: it started past the checkpoint.
    ("[    1.8] Oops: int3: 0000\n", ["true"], True, ""),
])
def test_which_deaths_before_the_checkpoint_boot_again(
        boot: qemu.Boot, console: str, argv: list[str], restored: bool, said: str) -> None:
    boot.dir.mkdir(parents=True)
    (boot.dir / qemu.SERIAL_LOG).write_text(console)
    b = replace(boot, restore=boot.dir / "x.vmstate" if restored else None)
    v = resume.Starting(b, qemu.Started(_exited(argv), [], None))
    assert resume._died_before_checkpoint(v) == said
