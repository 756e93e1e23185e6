"""Plain values a test may write, beyond the lab format's units: a TOS byte, a client
port, an iperf3 CPU affinity, an address family, intervals and durations. Each takes
the raw TOML value and returns the normalised one, or raises ValueError with a
message for the user (the loader adds the file, line and key)."""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable
from pathlib import Path

from hoplab.spec.units import parse_int, parse_str, parse_time

# iperf3 runs at most 128 parallel streams in one client (-P); hoplab runs each flow as
# an iperf3 client and server of its own, so 128 flows are 256 processes.
MAX_FLOWS = 128
# A verdict needs a few repetitions; every run of an experiment is scheduled before the
# first starts.
MAX_REPEAT = 1000
# A kernel's congestion control names (TCP_CA_NAME_MAX: 15 characters).
_CONGESTION = re.compile(r"[a-z][a-z0-9_]{0,14}")
AVAILABLE_CONGESTION = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def tos(value: object) -> int:
    """A TOS byte: 16, "0x10" or "0b00010000"."""
    if isinstance(value, str):
        try:
            number = int(value, 0)
        except ValueError:
            raise ValueError(f"a TOS is an integer 0-255 or a string like '0x10', "
                             f"got {value!r}") from None
    else:
        number = parse_int(value)
    if not 0 <= number <= 255:
        raise ValueError(f"a TOS must be 0-255, got {number}")
    return number


def positive_int(value: object) -> int:
    number = parse_int(value)
    if number < 1:
        raise ValueError(f"must be at least 1, got {number}")
    return number


def flows(value: object) -> int:
    """A count of parallel iperf3 flows."""
    number = positive_int(value)
    if number > MAX_FLOWS:
        raise ValueError(f"at most {MAX_FLOWS} flows, got {number}: iperf3 runs at most "
                         f"{MAX_FLOWS} parallel streams in one client (-P), and each flow "
                         f"here is an iperf3 client and server of its own")
    return number


def repeat(value: object) -> int:
    number = parse_int(value)
    if not 1 <= number <= MAX_REPEAT:
        raise ValueError(f"repeat must be 1 to {MAX_REPEAT}, got {number}: a verdict needs "
                         f"a few repetitions, and every run is scheduled before the first")
    return number


def congestion(value: object) -> str:
    """A TCP congestion control's name as the kernel spells it (iperf3 -C)."""
    text = parse_str(value)
    if not _CONGESTION.fullmatch(text):
        raise ValueError(f"{text!r} is not a congestion control's name (lowercase letters, "
                         f"digits and '_', at most 15, as the kernel's: cubic, reno, bbr)")
    return text


def congestion_missing(name: str, available: Collection[str], whose: str) -> str | None:
    """Why a kernel (`whose`) that can run the congestion controls `available` cannot
    run `name`, or None when it can."""
    if name in available:
        return None
    return (f"congestion control {name!r} is not available on {whose}, which has "
            f"{', '.join(available) or 'none'}")


def kernel_congestion(available: str, modules: Iterable[str]) -> tuple[str, ...]:
    """What a kernel can run: the names its tcp_available_congestion_control reads, and
    those its module files (tcp_NAME.ko...) add, which the kernel loads when a process
    with CAP_NET_ADMIN asks for one (Debian's bbr)."""
    extra = [m.split(".", 1)[0].removeprefix("tcp_") for m in modules
             if m.startswith("tcp_") and ".ko" in m]
    return tuple(dict.fromkeys([*available.split(), *extra]))


def host_congestion() -> tuple[str, ...] | None:
    """This machine's kernel's congestion controls; None when /proc does not say."""
    try:
        available = Path(AVAILABLE_CONGESTION).read_text()
    except OSError:
        return None
    modules = Path("/lib/modules", os.uname().release, "kernel", "net", "ipv4")
    try:
        names = [p.name for p in modules.iterdir()]
    except OSError:
        names = []
    return kernel_congestion(available, names)


def port(value: object) -> int:
    number = parse_int(value)
    if not 1024 <= number <= 65535:
        raise ValueError(f"a client port must be 1024-65535, got {number}")
    return number


def affinity(value: object) -> tuple[str, ...]:
    """iperf3 -A: "N" (client core) or "N,M" (client and server core); an array is cycled
    over the flows, so flow i is pinned to affinity[i % len]."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        text = str(item) if isinstance(item, int) and not isinstance(item, bool) else None
        text = text or parse_str(item)
        parts = text.split(",")
        if not (1 <= len(parts) <= 2 and all(p.strip().isdigit() for p in parts)):
            raise ValueError(f"an affinity is a core 'N' or 'N,M' (client, server), "
                             f"got {item!r}")
        out.append(",".join(p.strip() for p in parts))
    if not out:
        raise ValueError("an empty affinity array")
    return tuple(out)


def family(value: object) -> int:
    number = parse_int(value)
    if number not in (4, 6):
        raise ValueError(f"family is 4 or 6, got {number}")
    return number


def interval(value: object) -> float:
    seconds = parse_time(value)
    if seconds < 0.002:
        raise ValueError(f"an interval must be at least 2ms, got {value!r}")
    return seconds


def duration(value: object) -> float:
    seconds = parse_time(value)
    if seconds < 0.5:
        raise ValueError(f"a duration must be at least 0.5s, got {value!r}")
    return seconds


def whole_seconds(value: object) -> float:
    # iperf3 reads -t with atoi(): 2.5s would silently run for 2.
    seconds = duration(value)
    if seconds != int(seconds):
        raise ValueError(f"iperf3 runs for whole seconds; got {value!r}")
    return seconds
