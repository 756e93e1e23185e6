"""A stand-in for a router's firmware disk image (`vm = { image = ... }`): OpenWrt's
x86-64 image cannot be downloaded here, so the tests boot one made the same way a
firmware is: a disk whose boot sector loads a kernel and its root from the disk, with
no help from hoplab (no -kernel, no shares, no console line).

The disk is a FAT file system with SYSLINUX in its boot sector (Debian's syslinux,
mtools and dosfstools: made without mounting anything). It holds Debian's kernel and an
initramfs with only BusyBox and dropbear, as OpenWrt has: /init brings the first NIC
up at 192.168.1.1/24 (OpenWrt's LAN address) and runs dropbear, which lets in the key
given at build time. The lab NICs are left down and unaddressed, as OpenWrt leaves its
WAN port for the lab to configure. /etc/openwrt_release says which build it is.
"""

from __future__ import annotations

import gzip
import os
import shutil
import stat
import subprocess
from pathlib import Path

from hoplab.lab.vm import initramfs, kernel
from hoplab.lab.vm.qemu import APPEND
from tests.helpers.devices import libraries

KERNEL = "debian:6.12.100+deb12-amd64"
# The NIC drivers (6.1 does not build virtio_pci in), as a firmware builds its own in.
MODULES = ("virtio_pci", "virtio_net")
DROPBEAR = "/usr/sbin/dropbear"
NEEDS = ("syslinux", "mcopy", "mkfs.vfat", "dropbearkey")
LAN = "192.168.1.1"

INIT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
# Not in OpenWrt's BusyBox (tc comes from its tc-tiny or tc-full packages, when at all).
rm -f /bin/tc /bin/adjtimex /bin/ethtool
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /tmp /var/run /root/.ssh
mount -t devpts devpts /dev/pts
for m in $(cat /lib/mods/order); do insmod /lib/mods/$m.ko; done
hostname OpenWrt
ip link set lo up
ip addr add {LAN}/24 dev eth0
ip link set eth0 up
echo "stand-in firmware: eth0 {LAN}"
exec /usr/sbin/dropbear -F -E -s -p 22 -r /etc/dropbear/dropbear_ed25519_host_key \
  -r /etc/dropbear/dropbear_rsa_host_key
"""


def missing() -> list[str]:
    return [t for t in NEEDS if shutil.which(t) is None]


def _sh(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr}")
    return done.stdout


def _file(name: str, path: str, mode: int = 0o755) -> tuple[str, int, bytes]:
    return name, stat.S_IFREG | mode, Path(os.path.realpath(path)).read_bytes()


def build(d: Path, client_pub: str, release: str = "23.05.5") -> tuple[Path, str]:
    """The disk image in `d`, letting in `client_pub`: (its path, its SSH server's host
    public key line)."""
    d.mkdir(parents=True, exist_ok=True)
    k = kernel.debian(KERNEL.removeprefix("debian:"))
    # Both kinds, as OpenWrt makes them: dropbear with an ed25519 key alone fails an
    # assertion (rsa.c:164) when a client that knows no key of it asks for RSA.
    host_key, rsa_key = d / "host_key", d / "rsa_host_key"
    if not host_key.exists():
        _sh("dropbearkey", "-t", "ed25519", "-f", str(host_key))
    if not rsa_key.exists():
        _sh("dropbearkey", "-t", "rsa", "-s", "2048", "-f", str(rsa_key))
    pub = next(x for x in _sh("dropbearkey", "-y", "-f", str(host_key)).splitlines()
               if x.startswith("ssh-"))
    mods = initramfs.modules_of(k, MODULES)
    dirs = ("bin", "dev", "proc", "sys", "lib", "lib/mods", "etc", "etc/dropbear", "usr",
            "usr/sbin", "root", "tmp", "var", "lib64", "lib/x86_64-linux-gnu")
    files: list[tuple[str, int, bytes]] = [
        *((x, stat.S_IFDIR | 0o755, b"") for x in dirs),
        _file("bin/busybox", initramfs.BUSYBOX),
        ("init", stat.S_IFREG | 0o755, INIT.encode()),
        _file("usr/sbin/dropbear", DROPBEAR),
        *(_file(lib.lstrip("/"), lib) for lib in libraries(DROPBEAR)),
        ("etc/dropbear/dropbear_ed25519_host_key", stat.S_IFREG | 0o600,
         host_key.read_bytes()),
        ("etc/dropbear/dropbear_rsa_host_key", stat.S_IFREG | 0o600, rsa_key.read_bytes()),
        ("etc/dropbear/authorized_keys", stat.S_IFREG | 0o600, client_pub.encode()),
        ("root/.ssh", stat.S_IFDIR | 0o700, b""),
        ("root/.ssh/authorized_keys", stat.S_IFREG | 0o600, client_pub.encode()),
        ("etc/passwd", stat.S_IFREG | 0o644, b"root:x:0:0:root:/root:/bin/sh\n"),
        ("etc/group", stat.S_IFREG | 0o644, b"root:x:0:\n"),
        ("etc/shells", stat.S_IFREG | 0o644, b"/bin/sh\n"),
        ("etc/openwrt_release", stat.S_IFREG | 0o644,
         f"DISTRIB_ID='OpenWrt'\nDISTRIB_RELEASE='{release}'\n"
         f"DISTRIB_DESCRIPTION='OpenWrt {release} (hoplab stand-in)'\n".encode()),
        ("lib/mods/order", stat.S_IFREG | 0o644, " ".join(n for n, _ in mods).encode()),
        *((f"lib/mods/{n}.ko", stat.S_IFREG | 0o644, data) for n, data in mods),
    ]
    (d / "initrd.gz").write_bytes(gzip.compress(initramfs.cpio(files), compresslevel=1))
    (d / "syslinux.cfg").write_text(
        f"DEFAULT firmware\nPROMPT 0\nTIMEOUT 0\nLABEL firmware\n  KERNEL vmlinuz\n"
        f"  INITRD initrd.gz\n  APPEND {APPEND}\n")
    img = d / "firmware.img"
    img.unlink(missing_ok=True)
    size_kib = (k.image.stat().st_size + (d / "initrd.gz").stat().st_size) // 1024 + 4096
    _sh("mkfs.vfat", "-n", "FIRMWARE", "-C", str(img), str(size_kib))
    for name, src in (("vmlinuz", k.image), ("initrd.gz", d / "initrd.gz"),
                      ("syslinux.cfg", d / "syslinux.cfg")):
        _sh("mcopy", "-i", str(img), str(src), f"::{name}")
    _sh("syslinux", "--install", str(img))
    return img, " ".join(pub.split()[:2])
