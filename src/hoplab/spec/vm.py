"""A lab file's `vm = { ... }` table: a node that is a virtual machine hoplab boots
(docs/vm.md). Pure parsing: each function takes the raw value and raises ValueError
with what is wrong, and the loader adds the file, line and key."""

from __future__ import annotations

import ipaddress
import os
import re

from hoplab.nodes import ssh_address
from hoplab.spec.units import parse_size

KEYS = ("kernel", "modules", "image", "vcpus", "memory", "cpu", "user", "identity",
        "host_key", "management")
# A firmware image's keys (how its own SSH server is reached), and a kernel's.
IMAGE_KEYS = ("user", "identity", "host_key", "management")
KERNEL_KEYS = ("modules",)
MAX_VCPUS = 64
_MIB = 1 << 20


def kernel(value: object, base: str) -> str:
    """"debian:RELEASE", or a bzImage's path (relative to the lab file's directory)."""
    if not isinstance(value, str) or not value:
        raise ValueError('a kernel is "debian:RELEASE" (e.g. "debian:6.12.100+deb12-amd64") '
                         'or the path of a bzImage')
    if value.startswith("debian:"):
        if not re.fullmatch(r"[0-9][0-9A-Za-z.+~_-]*", value.removeprefix("debian:")):
            raise ValueError(f"{value!r}: not a Debian kernel release "
                             f'(e.g. "debian:6.12.100+deb12-amd64")')
        return value
    return path(value, base)


def path(value: object, base: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("a path is a non-empty string")
    return os.path.normpath(os.path.join(base, os.path.expanduser(value)))


def vcpus(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VCPUS:
        raise ValueError(f"vcpus is a whole number from 1 to {MAX_VCPUS}")
    return value


def memory(value: object) -> int:
    """MiB, at least 128 (the overlay root lives in it): "512M", "1G" or "512mib"."""
    if isinstance(value, str) and re.fullmatch(r"\d+[MG]", value):
        mib = int(value[:-1]) * (1024 if value.endswith("G") else 1)
    else:
        mib = parse_size(value) // _MIB
    if mib < 128:
        raise ValueError('memory is at least 128 MiB, e.g. "512M"')
    return mib


def cpu(value: object) -> float:
    """The share of one host CPU that each vCPU may use: "25%"."""
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = float(value[:-1])
        except ValueError:
            pct = -1.0
        if 0 < pct <= 100:
            return pct
    raise ValueError('cpu is a share of a host CPU per vCPU, from "1%" to "100%", e.g. "25%"')


def user(value: object) -> str:
    """The user the firmware's SSH server lets in (OpenWrt's is root)."""
    if not isinstance(value, str):
        raise ValueError('user is a user name, e.g. "root"')
    try:
        ssh_address.split_destination(f"{value}@127.0.0.1")
    except ValueError:
        raise ValueError(f"{value!r} is not a user name") from None
    return value


_HOST_KEY = re.compile(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+=*")


def host_key(value: object) -> str:
    """The firmware's SSH host public key, as a .pub file or known_hosts has it (its
    comment dropped)."""
    if isinstance(value, str):
        key = " ".join(value.split()[:2])
        if _HOST_KEY.fullmatch(key):
            return key
    raise ValueError('host_key is a public key line, e.g. "ssh-ed25519 AAAAC3Nz..." '
                     "(dropbearkey -y, or the device's /etc/dropbear/*.pub)")


def management(value: object) -> str:
    """The address (with its prefix) the firmware's first NIC has, where its SSH server
    listens: QEMU's user network is made that subnet."""
    try:
        iface = ipaddress.IPv4Interface(value if isinstance(value, str) else "")
    except ValueError:
        iface = None
    if iface is None or iface.network.prefixlen > 29 or iface.ip in (
            iface.network.network_address, iface.network.broadcast_address):
        raise ValueError('management is the IPv4 address and prefix of the firmware\'s '
                         'first NIC, e.g. "192.168.1.1/24" (OpenWrt\'s LAN)')
    return iface.with_prefixlen
