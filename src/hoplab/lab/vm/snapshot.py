"""Snapshots of booted guests: the state of a VM stopped at its checkpoint (its kernel
booted, nothing of the lab in it yet), saved by QEMU's migration into the cache once per
kind of VM, and resumed from by every later VM of that kind instead of booting. Under
TCG a boot to the checkpoint is seconds of CPU, four VMs booting at once on two cores
four times that; a restore is a tenth of a second (docs/vm.md).

A kind of VM is everything the guest's machine is made of: QEMU itself, its command
line with what differs between VMs taken out (name, directory, ports, MACs, the ends of
its NICs), and the kernel and initramfs files. A VM's own settings reach it after the
checkpoint (hoplab.lab.vm.resume), so one snapshot serves every lab."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

from hoplab.lab.vm import cache
from hoplab.lab.vm.qemu import Boot, Control, Nic, argv

SUFFIX, PARTIAL = ".vmstate", ".partial"
# Snapshots kept, the most recently used: about 75 MB each, and a bisection over built
# kernels makes one per commit.
KEEP = 24
# HOPLAB_VM_SNAPSHOTS=0: every VM boots (a boot's own time measured, bench/vm.py).
ENV = "HOPLAB_VM_SNAPSHOTS"


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def snapshot_dir() -> Path:
    return cache.cache_dir() / "snapshots"


def _identity(path: Path | None) -> list[object]:
    if path is None:
        return [None]
    st = os.stat(path)
    return [str(path), st.st_size, st.st_mtime_ns]


def key(b: Boot, exe: str) -> str:
    """The kind of VM `b` is (its snapshot's name)."""
    assert b.kernel is not None
    # What a NIC's other end is stays in: a tap gives the guest's virtio-net the
    # offloads of its virtio-net header (vnet_hdr) and a UDP socket none, and QEMU
    # refuses a snapshot made with the one for a VM with the other.
    like = replace(b, node="snapshot", ssh_port=0, dir=Path("/"), restore=None,
                   nics=tuple(Nic(f"02:00:00:00:ff:{i:02x}", f"n{i}",
                                  fd=0 if n.fd is not None else None,
                                  udp=(0, 0) if n.udp is not None else None)
                              for i, n in enumerate(b.nics)))
    parts = [argv(like, exe, Control(0, 0)), _identity(Path(exe)),
             _identity(b.kernel.boot_image), _identity(b.initrd)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


def path(k: str) -> Path:
    return snapshot_dir() / f"{k}{SUFFIX}"


def stored(b: Boot, exe: str) -> Path | None:
    """The snapshot `b` resumes from, if one is made and snapshots are on."""
    if not enabled() or b.kernel is None:
        return None
    p = path(key(b, exe))
    try:
        os.utime(p)          # used now: prune() keeps the most recently used
    except FileNotFoundError:
        return None
    return p


def prune(keep: int = KEEP) -> list[Path]:
    """Remove all but the `keep` most recently used snapshots; those removed. A lab
    resuming from one removed meanwhile holds it open, or boots (hoplab.lab.vm.boot)."""
    d = snapshot_dir()
    if not d.is_dir():
        return []
    made = []
    for p in d.glob(f"*{SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):
            made.append((p.stat().st_mtime_ns, p))
    old = [p for _, p in sorted(made, reverse=True)[keep:]]
    for p in old:
        forget(p)
    return old


def partial(k: str) -> Path:
    """Where this process writes snapshot `k` before renaming it into place: two labs
    making the same one at once each write their own, and the last rename wins (both
    are the same kind of VM)."""
    return snapshot_dir() / f".{k}.{os.getpid()}{PARTIAL}"


def forget(p: Path) -> None:
    """A snapshot QEMU could not resume from: the next VM of its kind boots."""
    with contextlib.suppress(FileNotFoundError):
        p.unlink()


def leftovers() -> list[Path]:
    """Partial snapshots of processes that are gone (killed while saving one)."""
    d = snapshot_dir()
    if not d.is_dir():
        return []
    out = []
    for p in d.glob(f".*{PARTIAL}"):
        pid = p.name.removesuffix(PARTIAL).rsplit(".", 1)[-1]
        if not pid.isdigit() or not Path(f"/proc/{pid}").exists():
            out.append(p)
    return out
