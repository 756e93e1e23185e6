"""`qdisc_options`: a queue discipline's options, named as tc names them.

    qdisc = "fq_codel"
    qdisc_options = { target = "5ms", interval = "100ms", ecn = true, keys = "src" }

Which options each discipline takes is decided here, once: the kernel's qdisc
and the userspace wire take the same names. `keys` picks the fields a flow is
hashed on, as tc's flow classifier names them (`src`, `dst`, `proto`,
`proto-src`, `proto-dst`, and `tunnel-...` for a tunnel's inner headers);
`5-tuple` is the default (src,dst,proto,proto-src,proto-dst).

`hosts` (fq_codel, the wire's) hashes hosts first, with the same key names, and
shares the link between host buckets, then between flows within each: seed 004's
HTB class per host bucket with an fq_codel leaf, in one discipline (as CAKE's
host isolation). tc has no single qdisc for it, so it is the wire's.
"""

from __future__ import annotations

from collections.abc import Callable

from hoplab.spec.units import kind, parse_bool, parse_int, parse_size, parse_str, parse_time

OptionValue = str | int | float | bool
Options = tuple[tuple[str, OptionValue], ...]

FLOW_KEYS = ("src", "dst", "proto", "proto-src", "proto-dst")
TUNNEL_KEYS = tuple(f"tunnel-{k}" for k in FLOW_KEYS)
FIVE_TUPLE = ",".join(FLOW_KEYS)


# tc sends these options as 32-bit counts, and codel's times as 32-bit microseconds.
_U32 = 2**32 - 1
_MAX_TIME_S = _U32 / 1e6


def _positive(value: object) -> int:
    n = parse_int(value)
    if not 1 <= n <= _U32:
        raise ValueError(f"expected a whole number from 1 to {_U32} (tc's 32-bit count), "
                         f"got {n}")
    return n


def _memory(value: object) -> int:
    n = parse_size(value)
    if n > _U32:
        raise ValueError(f"expected at most {_U32} bytes (tc's 32-bit count), got {value!r}")
    return n


def _divisor(value: object) -> int:
    n = _positive(value)
    if n & (n - 1) or n > 65536:
        raise ValueError(f"expected a power of two up to 65536 (as Linux), got {n}")
    return n


def _depth(value: object) -> int:
    n = _positive(value)
    if n > 127:
        raise ValueError(f"expected 1 to 127 packets per flow (Linux's SFQ bound), got {n}")
    return n


def _keys(value: object) -> str:
    """tc flow keys, comma-separated; returned normalised ("5-tuple" spelled out)."""
    text = parse_str(value)
    out: list[str] = []
    for k in (p.strip() for p in text.split(",")):
        if k in ("5-tuple", "tunnel-5-tuple"):
            prefix = "tunnel-" if k.startswith("tunnel-") else ""
            out += [prefix + f for f in FLOW_KEYS]
        elif k in FLOW_KEYS or k in TUNNEL_KEYS:
            out.append(k)
        else:
            raise ValueError(f"unknown flow key {k!r}; tc's flow keys: "
                             f"{', '.join(FLOW_KEYS)}, tunnel-... of each, or 5-tuple")
    return ",".join(dict.fromkeys(out))


def _perturb(value: object) -> float:
    """Whole seconds, 0 for off: tc reads sfq's and the flow filter's perturb as an integer."""
    s = parse_time(value)
    if not s.is_integer():
        raise ValueError(f"expected whole seconds (tc's perturb is an integer), got {kind(value)}")
    return s


def _time(value: object) -> float:
    s = parse_time(value)
    if s <= 0:
        raise ValueError(f"expected a time above 0, got {kind(value)}")
    if s > _MAX_TIME_S:
        raise ValueError(f"expected at most 4294s (tc holds it in 32-bit microseconds), "
                         f"got {value!r}")
    return s


PARSERS: dict[str, Callable[[object], OptionValue]] = {
    "limit": _positive, "memory_limit": _memory, "target": _time, "interval": _time,
    "ecn": parse_bool, "ce_threshold": _time, "flows": _positive, "quantum": _positive,
    "perturb": _perturb, "divisor": _divisor, "depth": _depth, "keys": _keys, "hosts": _keys,
}

# The options of each discipline (tc's names). fifo's only bound is `queue`.
BY_QDISC: dict[str, tuple[str, ...]] = {
    "codel": ("limit", "target", "interval", "ecn", "ce_threshold"),
    "fq_codel": ("limit", "memory_limit", "target", "interval", "flows", "quantum", "ecn",
                 "ce_threshold", "keys", "hosts"),
    "sfq": ("limit", "perturb", "quantum", "divisor", "depth", "flows", "keys"),
}


def parse_options(value: object) -> Options:
    """A `qdisc_options` table -> sorted (name, value) pairs; a bad one names its option."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a table like {{ target = \"5ms\" }}, got {kind(value)}")
    out: list[tuple[str, OptionValue]] = []
    for name, raw in value.items():
        parse = PARSERS.get(name)
        if parse is None:
            raise ValueError(f"unknown option {name!r}; options: {', '.join(PARSERS)}")
        try:
            out.append((name, parse(raw)))
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return tuple(sorted(out))


def queue_misfit(qdisc: str | None, queue_bytes: bool) -> str | None:
    """Why a link's `queue` cannot bound `qdisc`: codel's and sfq's limits count
    packets only (fq_codel has memory_limit for bytes), on the kernel as on the wire."""
    if queue_bytes and qdisc in ("codel", "sfq"):
        return (f'queue in bytes cannot bound qdisc = "{qdisc}", whose limit counts packets; '
                f'write queue = 1000 (packets) or qdisc_options = {{ limit = 1000 }}')
    return None


# tbf's own queue, when the link gives none, is 50 ms of traffic (hoplab.lab.shaping),
# which tc sends as a 32-bit byte count.
TBF_MAX_RATE_BPS = _U32 * 8 * 20


def rate_misfit(qdisc: str | None, rate_bps: int | None, queue: bool) -> str | None:
    """Why a rate is too high for `qdisc` as hoplab builds it."""
    if qdisc == "tbf" and not queue and rate_bps is not None and rate_bps > TBF_MAX_RATE_BPS:
        return ('qdisc = "tbf" is at most 687gbit without a queue: its queue is then 50 ms '
                "of traffic, which tc holds in a 32-bit byte count; give a queue "
                '(e.g. queue = "64mb")')
    return None


def misfit(qdisc: str | None, options: Options) -> str | None:
    """Why `options` do not belong to `qdisc`, or None when they all do."""
    allowed = BY_QDISC.get(qdisc or "", ())
    for name, _ in options:
        if name not in allowed:
            which = f'qdisc = "{qdisc}"' if qdisc else "no qdisc"
            has = f" (its options: {', '.join(allowed)})" if allowed else ""
            return f"{name} is not an option of {which}{has}"
    return None
