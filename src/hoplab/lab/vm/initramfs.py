"""The initramfs a VM boots into: BusyBox, the modules that mount this machine's root
over 9p (virtio) read-only with a writable overlay in memory (as virtme-ng does), and an
/init that does so, mounts the VM's own directory (its stage2 script, keys, NIC names)
at /hoplab and hands over to it. One per kernel release, cached; a VM's own settings
are in its directory, never in here."""

from __future__ import annotations

import gzip
import lzma
import stat
from pathlib import Path

from hoplab.errors import CapabilityError
from hoplab.lab.vm import cache
from hoplab.lab.vm.kernel import Kernel

BUSYBOX = "/bin/busybox"
# What mounting the root needs, in the order each can be loaded (dependencies first);
# a kernel with one built in simply has no file for it.
MODULES = ("netfs", "9pnet", "9pnet_virtio", "9p", "overlay")
# Tags of the 9p shares (qemu.py): this machine's root, the VM's directory, modules.
ROOT_TAG, CONFIG_TAG, MODULES_TAG = "hostroot", "hoplab", "modules"

_9P = "trans=virtio,version=9p2000.L"
# The root is read-only and this machine's files do not change under a lab: the guest
# may cache them (without it, every exec reads its binary and libraries over 9p again).
INIT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev
for m in $(cat /lib/mods/order); do insmod /lib/mods/$m.ko || echo "hoplab: insmod $m failed"; done
mkdir -p /lower /rw /newroot
mount -t 9p -o {_9P},ro,msize=512000,cache=loose {ROOT_TAG} /lower || exec sh
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work root /newroot || exec sh
mkdir -p /newroot/hoplab
mount -t 9p -o {_9P},ro {CONFIG_TAG} /newroot/hoplab || exec sh
umount /proc
exec switch_root /newroot /bin/sh /hoplab/stage2
"""


def image(kernel: Kernel) -> Path:
    """The initramfs for `kernel`, built the first time."""
    key = f"initramfs-{kernel.release}" if kernel.source.startswith("debian:") else \
        f"initramfs-{kernel.release}-{abs(hash((str(kernel.image), str(kernel.modules))))}"
    d = cache.entry(cache.cache_dir() / "initramfs" / key, lambda tmp: _build(kernel, tmp))
    return d / "initrd.gz"


def _modules(kernel: Kernel) -> list[tuple[str, bytes]]:
    if kernel.modules is None:
        return []
    paths = {}
    for line in (kernel.modules / "modules.dep").read_text().splitlines():
        rel = line.split(":", 1)[0]
        name = Path(rel).name.split(".ko", 1)[0].replace("-", "_")
        paths[name] = kernel.modules / rel
    out = []
    for name in MODULES:
        path = paths.get(name.replace("-", "_"))
        if path is None:
            continue
        data = path.read_bytes()
        if path.name.endswith(".xz"):
            data = lzma.decompress(data)
        elif path.name.endswith(".zst"):
            raise CapabilityError(f"module {path}: zstd-compressed modules are not "
                                  f"supported; build them uncompressed or xz")
        out.append((name, data))
    return out


def _build(kernel: Kernel, tmp: Path) -> None:
    if not Path(BUSYBOX).is_file():
        raise CapabilityError(f"{BUSYBOX} is missing (apt-get install busybox-static)")
    mods = _modules(kernel)
    files: list[tuple[str, int, bytes]] = [
        ("bin", stat.S_IFDIR | 0o755, b""), ("dev", stat.S_IFDIR | 0o755, b""),
        ("proc", stat.S_IFDIR | 0o755, b""), ("lib", stat.S_IFDIR | 0o755, b""),
        ("lib/mods", stat.S_IFDIR | 0o755, b""),
        ("bin/busybox", stat.S_IFREG | 0o755, Path(BUSYBOX).read_bytes()),
        ("init", stat.S_IFREG | 0o755, INIT.encode()),
        ("lib/mods/order", stat.S_IFREG | 0o644, " ".join(n for n, _ in mods).encode()),
        *((f"lib/mods/{n}.ko", stat.S_IFREG | 0o644, data) for n, data in mods),
    ]
    with gzip.open(tmp / "initrd.gz", "wb", compresslevel=1) as out:
        out.write(cpio(files))


def cpio(files: list[tuple[str, int, bytes]]) -> bytes:
    """An archive in the kernel's initramfs format (cpio "newc")."""
    parts = []
    for ino, (name, mode, data) in enumerate([*files, ("TRAILER!!!", 0, b"")], start=1):
        raw = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(raw), 0)
        head = b"070701" + b"".join(f"{f:08X}".encode() for f in fields)
        parts += [head, raw, b"\0" * (-(len(head) + len(raw)) % 4), data, b"\0" * (-len(data) % 4)]
    return b"".join(parts)
