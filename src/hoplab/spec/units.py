"""Parsers for the values a lab file may write: quantities with units, and plain values.

Every parser takes the raw TOML value (a string, or a number where a bare
number has an unambiguous meaning) and returns what the model stores: rates in
bit/s, times in seconds, sizes in bytes, percentages 0..100, networks,
commands. Errors are ValueError with a message written for the user; the
loader adds the file, line and key.

Decimal prefixes are powers of 1000 (kb = 1000 bytes) and binary ones (kib,
mib, ...) powers of 1024, as in tc. Units are case-insensitive.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network, ip_interface
from typing import TypeGuard, TypeVar

from hoplab.spec.model import QueueLimit

N = TypeVar("N", IPv4Network, IPv6Network)

_NUMBER_UNIT = re.compile(r"\s*(-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+))\s*([a-zA-Zµ%/]*)\s*")

_RATE_UNITS = {
    "bit": 1,
    "kbit": 10**3,
    "mbit": 10**6,
    "gbit": 10**9,
    "tbit": 10**12,
    "kibit": 2**10,
    "mibit": 2**20,
    "gibit": 2**30,
    "tibit": 2**40,
}

_TIME_UNITS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "min": Decimal(60),
    "h": Decimal(3600),
}

_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}

_PACKET_UNITS = ("p", "pkt", "pkts", "packets")

# Bounds, each where its value is parsed, with why it is what it is.
# tc keeps a shaped link's token bucket (1 ms of traffic, hoplab.lab.shaping) in a 32-bit
# byte count: HTB refuses a burst above 4 GiB, which 34.36 Tbit/s would need.
MAX_RATE_BPS = 34 * 10**12
MAX_RATE_WHY = ("tc keeps a shaped link's token bucket (1 ms of traffic) in a 32-bit "
                "byte count, which holds 34.36 Tbit/s at most")
# iperf3 refuses a test longer than a day (-t above 86400), and nothing else hoplab waits
# for (a pause, a start offset, an idle phase) needs longer.
MAX_TIME_S = 86400.0
# Past a round trip of 120 s (Linux TCP's longest retransmission timeout, TCP_RTO_MAX)
# every segment is sent again before its ACK could be back.
MAX_DELAY_S = 60.0
# tc holds a queue's limit in 32 bits: a byte count (bfifo, tbf, fq_codel's memory_limit)
# or a packet count, which tbf turns into bytes of 1514-byte frames (2.8 million).
MAX_QUEUE_BYTES = 2**32 - 1
MAX_QUEUE_PACKETS = 1_000_000


def _is_number(value: object) -> TypeGuard[int | float]:
    # TOML booleans arrive as Python bools, which are ints: never treat them as numbers.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _split(value: str, what: str, example: str) -> tuple[Decimal, str]:
    m = _NUMBER_UNIT.fullmatch(value)
    if m is None:
        raise ValueError(f"{value!r} is not a {what}; write a number and a unit, e.g. {example!r}")
    try:
        number = Decimal(m.group(1))
    except InvalidOperation:  # pragma: no cover - the regex only admits valid decimals
        raise ValueError(f"{value!r} is not a {what}") from None
    return number, m.group(2)


def parse_rate(value: object) -> int:
    """A rate in bit/s: "100mbit", "2.5Gbit", "500kbit", "64000bit" or an int of bit/s."""
    if _is_number(value):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"a bare rate is in bit/s and must be whole, got {value!r}")
        bps = int(value)
    elif isinstance(value, str):
        number, unit = _split(value, "rate", "100mbit")
        lower = unit.lower()
        if lower in ("k", "m", "g", "t"):
            raise ValueError(f"{value!r} has no unit; write e.g. '{number}{lower}bit'")
        if lower.endswith("bps") or lower.endswith("b/s"):
            # tc reads "mbps" as megaBYTES per second, a frequent 8x mistake: refuse it.
            raise ValueError(
                f"{value!r} is ambiguous: tc reads 'bps' as bytes per second "
                f"(so 'mbps' is megabytes/s); write bits, e.g. '{number}mbit'"
            )
        if lower not in _RATE_UNITS:
            raise ValueError(
                f"unknown rate unit {unit or '(none)'!r} in {value!r}; "
                f"use one of {', '.join(_RATE_UNITS)}"
            )
        bps = int((number * _RATE_UNITS[lower]).to_integral_value())
    else:
        raise ValueError(f"a rate must be a string like '100mbit' or an int of bit/s, "
                         f"got {kind(value)}")
    if bps <= 0:
        raise ValueError(f"a rate must be positive, got {value!r}")
    if bps > MAX_RATE_BPS:
        raise ValueError(f"a rate is at most 34tbit, got {value!r}: {MAX_RATE_WHY}")
    return bps


def parse_time(value: object) -> float:
    """A duration in seconds: "20ms", "1s", "500us", "1.5s", "2m" (minutes)."""
    if not isinstance(value, str):
        # A bare number could be seconds or milliseconds depending on the reader: refuse it.
        raise ValueError(f"a time needs a unit, e.g. '20ms' or '1.5s', got {kind(value)}")
    number, unit = _split(value, "time", "20ms")
    if number < 0:
        raise ValueError(f"a time must not be negative, got {value!r}")
    lower = unit.lower()
    if lower not in _TIME_UNITS:
        raise ValueError(
            f"unknown time unit {unit or '(none)'!r} in {value!r}; "
            f"use one of ns, us, ms, s, m (minutes), min, h"
        )
    seconds = number * _TIME_UNITS[lower]
    if seconds > Decimal(MAX_TIME_S):
        raise ValueError(f"a time is at most 24h, got {value!r}: iperf3 runs a test for a "
                         f"day at most (-t 86400), and nothing else hoplab waits for is "
                         f"longer")
    return float(seconds)


def parse_delay(value: object) -> float:
    """A one-way delay (or its jitter) in seconds, at most a minute."""
    seconds = parse_time(value)
    if seconds > MAX_DELAY_S:
        raise ValueError(f"a delay is at most 60s, got {value!r}: past a round trip of "
                         f"120 s (Linux TCP's longest retransmission timeout) every "
                         f"segment would be sent again before its ACK could be back")
    return seconds


def parse_size(value: object) -> int:
    """A size in bytes: "1500b", "64kb" (64000), "32kib" (32768), "1mb" or an int of bytes."""
    if _is_number(value):
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"a bare size is in bytes and must be whole, got {value!r}")
        size = int(value)
    elif isinstance(value, str):
        number, unit = _split(value, "size", "64kb")
        lower = unit.lower()
        if lower.endswith("bit"):
            raise ValueError(f"{value!r} is a number of bits; sizes are in bytes, e.g. '64kb'")
        if lower not in _SIZE_UNITS:
            raise ValueError(
                f"unknown size unit {unit or '(none)'!r} in {value!r}; "
                f"use one of {', '.join(_SIZE_UNITS)} (kb = 1000 bytes, kib = 1024)"
            )
        scaled = number * _SIZE_UNITS[lower]
        if scaled != scaled.to_integral_value():
            raise ValueError(f"{value!r} is not a whole number of bytes")
        size = int(scaled)
    else:
        raise ValueError(f"a size must be a string like '64kb' or an int of bytes, "
                         f"got {kind(value)}")
    if size <= 0:
        raise ValueError(f"a size must be positive, got {value!r}")
    return size


def parse_percent(value: object) -> float:
    """A percentage 0..100: "1%", 1 or 0.5 (bare numbers are already percent)."""
    if _is_number(value):
        pct = float(value)
    elif isinstance(value, str):
        number, unit = _split(value, "percentage", "1%")
        if unit != "%":
            raise ValueError(f"{value!r} is not a percentage; write e.g. '1%' or a bare number")
        pct = float(number)
    else:
        raise ValueError(f"a percentage must be like '1%' or a number, got {kind(value)}")
    if not 0.0 <= pct <= 100.0:
        raise ValueError(f"a percentage must be between 0 and 100, got {value!r}")
    return pct


# Frames per second a wire direction may be capped at: above 100 Mframes/s no emulated
# router forwards, and the wire's service time (ns per frame) would round to nothing.
MAX_PPS = 100_000_000


def parse_pps(value: object) -> int:
    """A frame rate ceiling: a whole number of frames per second, 1 .. MAX_PPS."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"pps is a whole number of frames per second, got {kind(value)}")
    if not 1 <= value <= MAX_PPS:
        raise ValueError(f"pps is 1 to {MAX_PPS} frames per second, got {value}")
    return value


def parse_queue(value: object) -> QueueLimit:
    """A queue bound: an int or "100p" is packets, a size string ("64kb") is bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"a queue limit must be positive, got {value!r}")
        return _packets(value, value)
    if isinstance(value, str):
        number, unit = _split(value, "queue limit", "100p")
        if unit.lower() in _PACKET_UNITS:
            if number != number.to_integral_value() or number <= 0:
                raise ValueError(f"a packet count must be a positive whole number, got {value!r}")
            return _packets(int(number), value)
        try:
            size = parse_size(value)
        except ValueError as e:
            raise ValueError(f"{e} (or packets, e.g. '100p')") from None
        if size > MAX_QUEUE_BYTES:
            raise ValueError(f"a queue is at most 4294967295 bytes (4gib less one), got "
                             f"{value!r}: tc holds a queue's limit in a 32-bit byte count")
        return QueueLimit(bytes=size)
    raise ValueError(f"a queue limit must be packets (100 or '100p') or a size ('64kb'), "
                     f"got {kind(value)}")


def _packets(count: int, value: object) -> QueueLimit:
    if count > MAX_QUEUE_PACKETS:
        raise ValueError(f"a queue is at most 1000000 packets, got {value!r}: tc holds a "
                         f"queue's limit in 32 bits, tbf's in bytes (1514 to a packet), "
                         f"and a million full frames are 1.5 GB in each direction")
    return QueueLimit(packets=count)


# Plain TOML values. TOML booleans are Python ints, hence the explicit bool checks.


def kind(value: object) -> str:
    """How a TOML value reads in a message: "an integer (5)"."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
             list: "an array", dict: "a table"}
    return f"{names.get(type(value), 'a date/time')} ({value!r})"


def parse_burst(value: object) -> float:
    """A mean loss burst length in frames: a number, 1 or more."""
    n = parse_number(value)
    if not 1.0 <= n <= 1e6:
        raise ValueError(f"a mean loss burst is 1 frame or more (and at most 1e6), got {value!r}")
    return float(n)


def parse_bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {kind(value)}")
    return value


def parse_int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, got {kind(value)}")
    return value


def parse_str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {kind(value)}")
    return value


def parse_number(value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"expected a number, got {kind(value)}")
    return value


def choice(choices: Sequence[str]) -> Callable[[object], str]:
    def parse(value: object) -> str:
        text = parse_str(value)
        if text not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return text
    return parse


def parse_mtu(value: object) -> int:
    mtu = parse_int(value)
    if not 576 <= mtu <= 65535:
        raise ValueError(f"an MTU must be between 576 and 65535, got {mtu}")
    return mtu


def network(cls: type[N]) -> Callable[[object], N]:
    # Room for the two ends of a link or tunnel: point-to-point /31 and /127 (RFC 3021,
    # RFC 6164) qualify, as ipaddress.hosts() yields both of their addresses.
    version, max_prefix = (4, 31) if cls is IPv4Network else (6, 127)

    def parse(value: object) -> N:
        try:
            net = cls(parse_str(value))
        except ValueError as e:
            raise ValueError(f"{value!r} is not an IPv{version} network in CIDR form: {e}"
                             ) from None
        if net.prefixlen > max_prefix:
            raise ValueError(f"{net} has no room for two hosts; use /{max_prefix} or shorter")
        return net
    return parse


def parse_interface(value: object) -> IPv4Interface | IPv6Interface:
    if "/" not in parse_str(value):
        raise ValueError(f"{value!r} needs a prefix length, e.g. '10.9.0.1/30'")
    try:
        return ip_interface(str(value))
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 or IPv6 address with prefix") from None


def parse_command(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as e:
            raise ValueError(f"cannot split {value!r}: {e}") from None
    elif isinstance(value, list) and all(isinstance(a, str) for a in value):
        argv = [str(a) for a in value]
    else:
        raise ValueError(f"a command is a string or an array of strings, got {kind(value)}")
    if not argv or not argv[0]:
        raise ValueError("empty command")
    return tuple(argv)
