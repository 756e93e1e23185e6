"""A VM's NICs at its links' places: each is a tap device made in the namespace of the
link's other end (or in the lab's link namespace between two VMs), opened here and
handed to QEMU as a file descriptor. The tap is not persistent: it lives as long as an
open descriptor does, so when QEMU exits (or is killed, or hoplab is killed before
QEMU starts) the kernel removes it, and nothing is left to clean."""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct

from hoplab.errors import LabError
from hoplab.nodes.registry import in_namespace

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000


def mac(lab: str, node: str, index: int) -> str:
    """A stable, locally administered MAC for NIC `index` of `node` (the same on every
    boot of the lab, so the guest names its NICs by it)."""
    digest = hashlib.sha256(f"{lab}/{node}/{index}".encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def _open(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(),
                                               IFF_TAP | IFF_NO_PI | IFF_VNET_HDR))
    except OSError:
        os.close(fd)
        raise
    return fd


def open_tap(netns: str | None, name: str) -> int:
    """A new tap `name` in namespace `netns` (None: this machine's), open. A tap is
    made in the namespace of the thread that opens /dev/net/tun."""
    try:
        with in_namespace(name, netns).inside():
            return _open(name)
    except OSError as exc:
        raise LabError(f"cannot make tap {name} in {netns or 'this machine'}: "
                       f"{exc.strerror}") from None
