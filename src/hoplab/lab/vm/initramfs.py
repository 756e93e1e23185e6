"""The initramfs a VM boots into: BusyBox, the modules that mount this machine's root
over 9p (virtio) read-only with a writable overlay in memory (as virtme-ng does), and an
/init that does so, mounts the VM's own directory (its stage2 script, keys, NIC names)
at /hoplab, sets the guest up from it and hands over to stage2 (the SSH server). One per
kernel release and content, cached; a VM's own settings
are in its directory, never in here."""

from __future__ import annotations

import gzip
import hashlib
import lzma
import stat
from pathlib import Path

from hoplab.errors import CapabilityError
from hoplab.lab.vm import cache
from hoplab.lab.vm.kernel import Kernel

BUSYBOX = "/bin/busybox"
# What mounting the root and the management NIC need (with what each depends on, from
# modules.dep); a kernel with one built in simply has no file for it (6.12 builds
# virtio_pci in, 6.1 does not).
MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay", "virtio_net")
# Tags of the 9p shares (qemu.py): this machine's root, the VM's directory, modules.
ROOT_TAG, CONFIG_TAG, MODULES_TAG = "hostroot", "hoplab", "modules"
# The management NIC's name and address on QEMU's user network (10.0.2.0/24, where
# 10.0.2.2 is this machine): SSH comes in on it, through a forward on loopback.
MGMT_IF = "mgmt"
MGMT_ADDR = "10.0.2.15/24"
READY = "hoplab-vm-ready"
# Where the guest finds hoplab's perf wrapper (hoplab.lab.vm.guest.PERF_WRAPPER).
PERF_AT = "/usr/local/bin/perf"
# The checkpoint (hoplab.lab.vm.resume) and the line the guest writes on going on.
CHECKPOINT, RESUMED = "hoplab-checkpoint", "hoplab-resumed"
# What a restored guest's kernel says when QEMU's VM generation ID has changed and it
# has reseeded its random numbers (drivers/virt/vmgenid.c, random.c).
RESEEDED = "virtual machine fork"

DIRS = ("bin", "dev", "proc", "sys", "lib", "lib/mods")

_9P = "trans=virtio,version=9p2000.L"
# The root is read-only and this machine's files do not change under a lab: the guest
# may cache them (without it, every exec reads its binary and libraries over 9p again).
# Everything up to the SSH server is done here, by BusyBox's builtins in memory: each
# exec of one of this machine's binaries over 9p costs tens of ms under TCG. The mounts
# made under /newroot move with it at switch_root.
INIT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
# A root that cannot be mounted ends the VM at once: hoplab shows this console.
fail() {{ echo "hoplab: the VM's root cannot be mounted"; poweroff -f; }}
mount -t proc proc /proc
echo "hoplab-init $(cut -d" " -f1 /proc/uptime)"
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /lib/mods/order); do insmod /lib/mods/$m.ko || echo "hoplab: insmod $m failed"; done
echo "hoplab-modules $(cut -d" " -f1 /proc/uptime)"
# The checkpoint: the kernel has booted and nothing of the lab is in the guest yet.
# hoplab snapshots the first VM of its kind here, and VMs restored from that snapshot
# resume here (hoplab.lab.vm.resume). Either way hoplab's line on the console lets it
# go on: the wall clock (a restored guest's is the snapshot's) and whether it was
# restored. A restored kernel reseeds its random numbers when it sees QEMU's new VM
# generation ID; it is waited for, so no two VMs restored from one snapshot draw the
# same numbers. A kernel without vmgenid reseeds from its pool, which virtio-rng fills,
# within max(1 s, uptime / 2) of its last reseed: that long is waited then.
echo "{CHECKPOINT} $(cut -d" " -f1 /proc/uptime)"
read -r _ epoch restored
date -s "@$epoch" >/dev/null
if [ "$restored" = 1 ]; then
  n=0
  until dmesg | grep -q "{RESEEDED}"; do
    n=$((n+1))
    if [ $n -ge 100 ]; then
      echo "hoplab: no reseed by vmgenid; waiting for the kernel's own"
      sleep $(( $(cut -d. -f1 /proc/uptime) / 2 + 1 ))
      head -c 16 /dev/urandom >/dev/null; break
    fi
    usleep 20000
  done
fi
echo "{RESUMED} $(cut -d" " -f1 /proc/uptime)"
mkdir -p /lower /rw /newroot
mount -t 9p -o {_9P},ro,msize=512000,cache=loose {ROOT_TAG} /lower || fail
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work root /newroot || fail
cd /newroot
mkdir -p hoplab
mount -t 9p -o {_9P},ro {CONFIG_TAG} hoplab || fail
mount -t proc proc proc
mount -t sysfs sys sys
mount -t devtmpfs dev dev
mkdir -p dev/pts dev/shm
mount -t devpts devpts dev/pts
mount -t tmpfs shm dev/shm
# This machine's /run, /tmp and /var/tmp are its own: the guest's are new and empty,
# and so is root's home (no dotfiles of this machine's root run at each login).
for d in run tmp var/tmp var/log root; do mount -t tmpfs -o mode=0755 tmpfs $d; done
mount -t debugfs debugfs sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs sys/kernel/tracing 2>/dev/null
if [ -s hoplab/modules ]; then
  mkdir -p lib/modules/$(uname -r)
  mount -t 9p -o {_9P},ro,cache=loose {MODULES_TAG} lib/modules/$(uname -r)
  # perf behind hoplab's wrapper (hoplab.lab.vm.guest), unless the root has one there:
  # put by BusyBox here, as an exec of this machine's install over 9p costs more.
  if [ ! -e .{PERF_AT} ]; then
    mkdir -p .{PERF_AT.rsplit("/", 1)[0]}
    cp hoplab/perf .{PERF_AT} && chmod 0755 .{PERF_AT}
  fi
fi
hostname "$(cat hoplab/hostname)"
# The NICs in PCI order, which is the order of QEMU's command line and of hoplab/nics:
# each gets the lab's name and MAC (a restored guest has the snapshot's MACs until
# here). Through names of hoplab's own first, so that no lab name is taken meanwhile.
set -- $(for d in /sys/class/net/*; do
  [ -e $d/device ] && echo "$(readlink -f $d/device/..) ${{d##*/}}"
done | sort | cut -d" " -f2)
i=0
for dev in "$@"; do ip link set dev "$dev" name "hoplabnic$i"; i=$((i+1)); done
i=0
while read -r mac name; do
  ip link set dev "hoplabnic$i" address "$mac" name "$name"
  i=$((i+1))
done < hoplab/nics
ip link set lo up
ip addr add {MGMT_ADDR} dev {MGMT_IF}
ip link set {MGMT_IF} up
sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
sysctl -qw net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0
mkdir -p root/.ssh && chmod 700 root/.ssh
cp hoplab/authorized_keys root/.ssh/authorized_keys && chmod 600 root/.ssh/authorized_keys
echo "{READY} $(cut -d" " -f1 /proc/uptime)"
umount /proc /sys
cd /
exec switch_root /newroot /bin/sh /hoplab/stage2
"""


def image(kernel: Kernel) -> Path:
    """The initramfs for `kernel`, built the first time."""
    # Keyed by what it holds too: a cached image of another /init is never booted.
    made = hashlib.sha256(f"{INIT}{MODULES}{DIRS}".encode()).hexdigest()[:12]
    key = f"initramfs-{kernel.release}-{made}" if kernel.source.startswith("debian:") else \
        f"initramfs-{kernel.release}-{made}-{_build_key(kernel)}"
    d = cache.entry(cache.cache_dir() / "initramfs" / key, lambda tmp: _build(kernel, tmp))
    return d / "initrd.gz"


def _build_key(kernel: Kernel) -> str:
    """A user's own build, by its paths and the size and time of its image and
    modules.dep: the same in every process (Python's hash() of a string is not, and each
    run built the image again), and new when the kernel is rebuilt in place, as a bisection
    does, so modules of the build before are never booted."""
    parts = [str(kernel.image), str(kernel.modules)]
    for path in (kernel.image, kernel.modules / "modules.dep" if kernel.modules else None):
        if path is not None and path.exists():
            st = path.stat()
            parts += [str(st.st_size), str(st.st_mtime_ns)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _dependencies(modules: Path) -> dict[str, tuple[Path, list[str]]]:
    """Each module's file and the modules it needs, from modules.dep."""
    def name(rel: str) -> str:
        return Path(rel).name.split(".ko", 1)[0].replace("-", "_")

    out = {}
    for line in (modules / "modules.dep").read_text().splitlines():
        rel, _, deps = line.partition(":")
        out[name(rel)] = (modules / rel, [name(d) for d in deps.split()])
    return out


def modules_of(kernel: Kernel, names: tuple[str, ...] = MODULES) -> list[tuple[str, bytes]]:
    """The modules `names` need, each after those it depends on, uncompressed."""
    if kernel.modules is None:
        return []
    known = _dependencies(kernel.modules)
    order: list[str] = []

    def visit(mod: str) -> None:
        if mod in order or mod not in known:
            return
        for dep in known[mod][1]:
            visit(dep)
        order.append(mod)

    for mod in names:
        visit(mod)
    out = []
    for mod in order:
        path = known[mod][0]
        data = path.read_bytes()
        if path.name.endswith(".xz"):
            data = lzma.decompress(data)
        elif not path.name.endswith(".ko"):
            raise CapabilityError(f"module {path}: only uncompressed or xz-compressed "
                                  f"modules are supported")
        out.append((mod, data))
    return out


def _build(kernel: Kernel, tmp: Path) -> None:
    if not Path(BUSYBOX).is_file():
        raise CapabilityError(f"{BUSYBOX} is missing (apt-get install busybox-static)")
    mods = modules_of(kernel)
    files: list[tuple[str, int, bytes]] = [
        *((d, stat.S_IFDIR | 0o755, b"") for d in DIRS),
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
