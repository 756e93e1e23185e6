"""What a VM finds in its own directory (shared read-only at /hoplab): the stage2 script
that /init hands over to on the overlay root, its hostname, which MAC gets which NIC
name, the key SSH logs in with and the SSH server's host key."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hoplab.errors import CapabilityError
from hoplab.lab.vm.initramfs import MODULES_TAG

# The management NIC's name and address on QEMU's user network (10.0.2.0/24, where
# 10.0.2.2 is this machine): SSH comes in on it, through a forward on loopback.
MGMT_IF = "mgmt"
MGMT_ADDR = "10.0.2.15/24"
READY = "hoplab-vm-ready"

STAGE2 = f"""#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
# This machine's /run, /tmp and /var/tmp are its own: the guest's are new and empty.
# and so is root's home (no dotfiles of this machine's root run at each login).
for d in /run /tmp /var/tmp /var/log /root; do mount -t tmpfs -o mode=0755 tmpfs $d; done
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
if [ -s /hoplab/modules ]; then
  mkdir -p /lib/modules/$(uname -r)
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose {MODULES_TAG} /lib/modules/$(uname -r)
  # perf walks this whole tree when it starts (8,000 stats over 9p: 40 s under TCG);
  # walked once now, in the background, the guest's caches answer it.
  (find /lib/modules/$(uname -r) > /dev/null 2>&1 &)
fi
hostname "$(cat /hoplab/hostname)"
modprobe virtio_net 2>/dev/null
# The NICs by MAC: the lab's names, as the plan has them.
while read -r mac name; do
  for d in /sys/class/net/*; do
    [ "$(cat $d/address)" = "$mac" ] && ip link set dev "${{d##*/}}" name "$name"
  done
done < /hoplab/nics
ip link set lo up
ip addr add {MGMT_ADDR} dev {MGMT_IF}
ip link set {MGMT_IF} up
sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
sysctl -qw net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0
mkdir -p /root/.ssh && chmod 700 /root/.ssh
cp /hoplab/authorized_keys /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys
echo "{READY} $(cut -d" " -f1 /proc/uptime)" > /dev/ttyS0
# The SSH server is the guest's first process from here on: it reaps every child.
exec dropbear -F -E -s -p 22 -r /hoplab/host_key
"""


def _tool(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError as exc:
        raise CapabilityError(f"{argv[0]} is missing ({exc}): apt-get install "
                              f"dropbear-bin openssh-client") from None
    if done.returncode != 0:
        raise CapabilityError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def make_keys(d: Path) -> tuple[Path, str]:
    """A client key (OpenSSH format, for hoplab's SSH) and a host key (Dropbear's
    format, for the guest's server) in `d`: (client key, host public key line)."""
    d.mkdir(parents=True, exist_ok=True)
    client = d / "client_key"
    if not client.exists():
        _tool(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hoplab-vm", "-f",
               str(client)])
    host = d / "host_key"
    if not host.exists():
        _tool(["dropbearkey", "-t", "ed25519", "-f", str(host)])
    pub = next(line for line in _tool(["dropbearkey", "-y", "-f", str(host)]).splitlines()
               if line.startswith("ssh-"))
    return client, " ".join(pub.split()[:2])


def write_dir(d: Path, *, hostname: str, nics: list[tuple[str, str]], keys: Path,
              modules: bool) -> None:
    """The VM's directory: everything stage2 reads."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "stage2").write_text(STAGE2)
    (d / "hostname").write_text(hostname + "\n")
    (d / "nics").write_text("".join(f"{m} {n}\n" for m, n in nics))
    (d / "modules").write_text("1" if modules else "")
    (d / "authorized_keys").write_text((keys / "client_key.pub").read_text())
    (d / "host_key").write_bytes((keys / "host_key").read_bytes())
