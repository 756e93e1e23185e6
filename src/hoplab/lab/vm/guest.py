"""What a VM finds in its own directory (shared read-only at /hoplab): the stage2 script
that /init hands over to on the overlay root, its hostname, which MAC gets which NIC
name, the key SSH logs in with and the SSH server's host key."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hoplab.errors import CapabilityError
from hoplab.lab.vm.initramfs import MGMT_ADDR, MGMT_IF, PERF_AT, READY

__all__ = ["CONFIGURED", "CONFIG_ERR", "CONFIG_RC", "MGMT_ADDR", "MGMT_IF", "PERF_AT", "READY",
           "configured",
           "make_keys", "write_dir"]

# /init (initramfs.py) has set the guest up. The lab's configuration of it (sysctls,
# addresses, routes, its own tc, NAT: `config`, a vm/script.py script) runs next, before
# the SSH server: its banner then says the VM is configured, and no SSH session is
# spent on it (one per VM, with its key exchange under TCG, was 1 to 2 s of a four-VM
# lab's up). Its exit status goes to the console, its messages to CONFIG_ERR. The SSH
# server becomes its first process and reaps every child.
CONFIGURED = "hoplab-configured"
CONFIG_ERR, CONFIG_RC = "/run/hoplab-config.err", "/run/hoplab-config.rc"
# perf reads every entry of /lib/modules/RELEASE as it starts: 5,186 of them for
# Debian's 6.12, over a 9p share of this machine's under TCG. In the guest, perf runs in
# a mount namespace of its own with that tree hidden: module symbols come from
# /proc/kallsyms (virtnet_poll still names itself; its DSO reads [kernel.kallsyms], not
# [virtio_net]). With build IDs off too (hoplab.profile.record), a recording of 0.5 s
# took 3.5 s from perf's start to its data written, against 10.9 s before (medians of 3,
# `bench/vm.py --perf 3`). /usr/local/bin comes first in an SSH session's PATH; the
# wrapper runs the perf after it, as is where the tmpfs cannot be mounted.
PERF_WRAPPER = """#!/bin/sh
# hoplab: perf with /lib/modules/RELEASE (a 9p share here) hidden; see hoplab.lab.vm.guest.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
exec unshare -m sh -c 'mount -t tmpfs -o size=64k,mode=0755 hoplab-perf \
  "/lib/modules/$(uname -r)" 2>/dev/null; exec perf "$@"' perf "$@"
"""

STAGE2 = f"""#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ -s /hoplab/config ]; then
  sh /hoplab/config >/dev/null 2>{CONFIG_ERR}
  rc=$?
  echo "$rc" > {CONFIG_RC}
  echo "{CONFIGURED} $rc $(cut -d" " -f1 /proc/uptime)"
fi
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
              modules: bool, config: str = "") -> None:
    """The VM's directory: everything stage2 reads."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "stage2").write_text(STAGE2)
    (d / "perf").write_text(PERF_WRAPPER)
    (d / "config").write_text(config)
    (d / "hostname").write_text(hostname + "\n")
    (d / "nics").write_text("".join(f"{m} {n}\n" for m, n in nics))
    (d / "modules").write_text("1" if modules else "")
    (d / "authorized_keys").write_text((keys / "client_key.pub").read_text())
    (d / "host_key").write_bytes((keys / "host_key").read_bytes())


def configured(serial_log: Path) -> int | None:
    """The exit status of the lab's configuration of the guest, from its console (None:
    it said none, as a VM with nothing to configure says none)."""
    try:
        text = serial_log.read_bytes().decode(errors="replace")
    except OSError:
        return None
    # Anywhere in a line: a kernel message may share it.
    found = re.search(rf"{CONFIGURED} (\d+) ", text)
    return int(found.group(1)) if found else None
