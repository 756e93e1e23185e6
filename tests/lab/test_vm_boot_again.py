"""A VM whose kernel dies before its checkpoint is booted once more (docs/vm.md): under
multi-threaded TCG a 6.12 guest oopsed on a stale int3 1.9 s into a boot, one boot in
some hundreds. The death here is real and certain: the kernel is told to run an init
its initramfs has not got (`rdinit=`), finds no root file system, and panics. The second
QEMU gets the taps hoplab held meanwhile, as the lab configured their other ends, so h1
reaches h2 through r1; a kernel that dies twice fails `lab up`, naming its panic (the
whole of it: hoplab reads the console while it holds the console's end), and leaves
nothing."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hoplab.errors import LabError
from hoplab.lab import build
from hoplab.lab.vm import qemu, resume, snapshot
from hoplab.spec import load_lab
from tests.helpers.lab import lab_namespaces, new_lab_name, remove_lab, run_in
from tests.lab.test_vm import RELEASE, lab_qemus

pytestmark = [pytest.mark.root, pytest.mark.pairs,
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                                 reason="qemu-system-x86 is not installed")]

LAB = f"""
[nodes.h1]
[nodes.r1]
vm = {{ kernel = "debian:{RELEASE}", vcpus = 1, memory = "256M" }}
[nodes.h2]
[[links]]
between = ["h1", "r1"]
[[links]]
between = ["r1", "h2"]
"""
# The initramfs's init it was told to run is not there, so the kernel looks for a root
# file system it was given none of.
PANIC = "Kernel panic - not syncing: VFS: Unable to mount root fs"


def _starts(monkeypatch: pytest.MonkeyPatch,
            change: Callable[[list[str], int], None]) -> list[list[str]]:
    """Every QEMU command line hoplab starts, in the list returned, after `change` (given
    it and how many started before it) had its say; booted, never resumed, since a VM
    resumed from a snapshot never boots its kernel."""
    started: list[list[str]] = []
    real = qemu.argv

    def argv(*args: Any, **kwargs: Any) -> list[str]:
        out = real(*args, **kwargs)
        change(out, len(started))
        started.append(out)
        return out

    monkeypatch.setattr(qemu, "argv", argv)
    monkeypatch.setenv(snapshot.ENV, "0")
    return started


def _dying(monkeypatch: pytest.MonkeyPatch, times: int) -> list[list[str]]:
    """QEMU's first `times` starts boot a kernel that panics before its checkpoint."""
    def change(out: list[str], before: int) -> None:
        if before < times:
            out[out.index("-append") + 1] += " rdinit=/hoplab-no-such-init"
    return _starts(monkeypatch, change)


def _lab_file(tmp_path: Path) -> Path:
    file = tmp_path / "lab.toml"
    file.write_text(LAB)
    return file


def _h1_reaches_h2(result: build.UpResult) -> None:
    """Through r1's second kernel, on the taps its first QEMU had."""
    h2 = next(a.ip for a in result.plan.node("h2").ifaces[0].addrs if a.version == 4)
    done = run_in(result.plan.node("h1").netns, "ping", "-c", "1", "-W", "5", str(h2))
    assert done.returncode == 0, done.stdout + done.stderr


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_kernel_that_dies_before_its_checkpoint_boots_again_on_the_same_taps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = _dying(monkeypatch, 1)
    name = new_lab_name()
    file = _lab_file(tmp_path)
    fds = _fds()
    try:
        result = build.up(load_lab(file, name=name))
        assert len(started) == 2
        [warning] = result.warnings
        vm_dir = Path(result.state.summary["nodes"]["r1"]["vm"]["dir"])
        kept = vm_dir / "serial.1.log"
        assert warning.startswith("VM r1: its kernel oopsed ("), warning
        assert warning.endswith(") before its checkpoint, and it was booted again; the "
                                "first boot's console and QEMU's messages are serial.1.log "
                                f"and qemu.1.log in {vm_dir}"), warning
        assert PANIC in warning, warning
        assert PANIC in kept.read_text()
        assert PANIC not in (vm_dir / qemu.SERIAL_LOG).read_text()
        assert result.state.summary["nodes"]["r1"]["vm"]["start"] == "booted again"
        _h1_reaches_h2(result)
        # hoplab holds none of them once the VM is up: they go with QEMU.
        assert _fds() == fds
    finally:
        remove_lab(name)
    assert not lab_qemus(name) and not lab_namespaces(name)


def test_a_kernel_that_dies_twice_fails_the_lab_naming_its_panic(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = _dying(monkeypatch, 2)
    name = new_lab_name()
    file = _lab_file(tmp_path)
    fds = _fds()
    try:
        with pytest.raises(LabError) as err:
            build.up(load_lab(file, name=name))
    finally:
        remove_lab(name)
    assert len(started) == 2
    assert "VM r1: QEMU exited with 0 before its checkpoint" in str(err.value), err.value
    assert PANIC in str(err.value)
    # Its whole panic, to the end of its stack: hoplab read the console as it came
    # (unread, the guest's UART stalled some 270 bytes in, mid-line, for 15 s).
    assert "</TASK>" in str(err.value), err.value
    assert not lab_qemus(name) and not lab_namespaces(name)
    assert _fds() == fds


def test_a_qemu_that_crashes_before_the_checkpoint_boots_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """QEMU itself dying of a fault (TCG: a SIGSEGV seen once at load 17) before its
    guest's checkpoint: a real SIGSEGV, sent while QEMU holds its vCPUs paused (`-S`),
    so before the checkpoint for certain; the VM boots again."""
    def paused(out: list[str], before: int) -> None:
        if not before:
            out.append("-S")

    def plan(vms: Any, exe: str) -> list[resume.Starting]:
        # Its QEMU started and recorded, and waited for from here on.
        [(_, first)] = vms
        os.kill(first.proc.pid, signal.SIGSEGV)
        first.proc.wait(timeout=30)
        return real_plan(vms, exe)

    real_plan = resume.plan
    started = _starts(monkeypatch, paused)
    monkeypatch.setattr(resume, "plan", plan)
    name = new_lab_name()
    file = _lab_file(tmp_path)
    try:
        result = build.up(load_lab(file, name=name))
        assert len(started) == 2
        [warning] = result.warnings
        assert warning.startswith("VM r1: QEMU crashed (SIGSEGV) before its checkpoint, "
                                  "and it was booted again;"), warning
        assert result.state.summary["nodes"]["r1"]["vm"]["start"] == "booted again"
        _h1_reaches_h2(result)
    finally:
        remove_lab(name)
    assert not lab_qemus(name) and not lab_namespaces(name)
