"""Whether this machine can run VM nodes, and why not (`hoplab doctor`)."""

from __future__ import annotations

import os
import shutil
from typing import Any

from hoplab.lab.vm import accel, initramfs, qemu

# What booting a VM needs here, and the Debian package that brings it.
NEEDS = {qemu.QEMU: "qemu-system-x86", "dropbear": "dropbear-bin",
         "dropbearkey": "dropbear-bin", "ssh-keygen": "openssh-client", "depmod": "kmod",
         "dpkg-deb": "dpkg"}


def _missing() -> list[str]:
    out = [f"{tool} (apt-get install --no-install-recommends {pkg})"
           for tool, pkg in NEEDS.items() if shutil.which(tool) is None]
    if not os.path.isfile(initramfs.BUSYBOX):
        out.append(f"{initramfs.BUSYBOX} (apt-get install --no-install-recommends "
                   f"busybox-static)")
    if not os.access("/dev/net/tun", os.R_OK | os.W_OK):
        out.append("/dev/net/tun (the VMs' NICs are taps)")
    return out


def report() -> dict[str, Any]:
    """{"available", "missing", "accel", "why"}: the accelerator as the first VM found
    it (None: no VM has booted here yet; KVM is tried then)."""
    missing = _missing()
    known = accel.remembered() or {}
    forced = os.environ.get("HOPLAB_VM_ACCEL")
    return {"available": not missing, "missing": missing,
            "accel": forced or known.get("accel"),
            "why": "HOPLAB_VM_ACCEL" if forced else known.get("why")}
