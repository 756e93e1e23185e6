"""A lab file's `vm = { ... }` table: a node that is a virtual machine hoplab boots
(docs/vm.md). Pure parsing: each function takes the raw value and raises ValueError
with what is wrong, and the loader adds the file, line and key."""

from __future__ import annotations

import os
import re

from hoplab.spec.units import parse_size

KEYS = ("kernel", "modules", "vcpus", "memory", "cpu")
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



