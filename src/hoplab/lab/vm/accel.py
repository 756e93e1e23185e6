"""Which accelerator a VM gets: KVM where a guest actually boots under it, else TCG
(multi-threaded). Whether KVM works is tried once, with a real boot of the first kernel
a lab asks for, and remembered in the cache: on a machine that is itself a VM, /dev/kvm
can open and KVM_CREATE_VM succeed while a guest hangs early in its boot."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from hoplab.lab.vm import cache

PROBE_TIMEOUT_S = 20.0
RECORD = "accel.json"


def _record() -> Path:
    return cache.cache_dir() / RECORD


def remembered() -> dict[str, str] | None:
    try:
        data = json.loads(_record().read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def known() -> str:
    """"kvm" or "tcg" without a probe (a firmware image cannot be asked to power itself
    off as the probe's kernel is): HOPLAB_VM_ACCEL, else what the first kernel VM here
    found, else TCG."""
    forced = os.environ.get("HOPLAB_VM_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    found = (remembered() or {}).get("accel")
    return found if found in ("kvm", "tcg") else "tcg"


def choose(image: Path, initrd: Path, exe: str) -> str:
    """"kvm" or "tcg"; HOPLAB_VM_ACCEL forces one."""
    forced = os.environ.get("HOPLAB_VM_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    known = remembered()
    if known is not None and known.get("accel") in ("kvm", "tcg"):
        return known["accel"]
    with cache.locked(_record()):
        known = remembered()
        if known is not None and known.get("accel") in ("kvm", "tcg"):
            return known["accel"]
        accel, why = probe(image, initrd, exe)
        _record().write_text(json.dumps({"accel": accel, "why": why}))
        return accel


def probe(image: Path, initrd: Path, exe: str) -> tuple[str, str]:
    """(accelerator, why): a guest that powers itself off from its initramfs under KVM."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return "tcg", f"/dev/kvm: {exc.strerror}"
    os.close(fd)
    argv = [exe, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-accel", "kvm", "-cpu", "host", "-m", "256M", "-kernel", str(image),
            "-initrd", str(initrd), "-serial", "none",
            "-append", "panic=-1 rdinit=/bin/busybox -- poweroff -f"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "tcg", f"a guest under KVM did not finish booting in {PROBE_TIMEOUT_S:.0f} s"
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-2:])
        return "tcg", f"QEMU under KVM failed: {tail}"
    return "kvm", "a guest booted under KVM"
