"""Plain values a test may write, beyond the lab format's units: a TOS byte, a client
port, an iperf3 CPU affinity, an address family, intervals and durations. Each takes
the raw TOML value and returns the normalised one, or raises ValueError with a
message for the user (the loader adds the file, line and key)."""

from __future__ import annotations

from hoplab.spec.units import parse_int, parse_str, parse_time


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
