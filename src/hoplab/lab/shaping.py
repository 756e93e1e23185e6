"""tc commands that give one direction of a link its rate, queue and impairments.

Pure: a Direction and a device name in, `tc -batch` lines out. Every
direction is shaped at its sender's egress, so a link's two directions are
independent, as on a real full-duplex wire.
"""

from __future__ import annotations

from hoplab.spec.model import Direction

# Bytes a frame occupies in a byte-limited queue when only a packet count is known.
FRAME_BYTES = 1514
# veth hands GSO super-frames of up to 64 KiB to the qdisc; a bucket smaller
# than that makes HTB and TBF stall on each one and undershoot the rate.
MIN_BURST = 64 * 1024 + FRAME_BYTES


def _rate(bps: int) -> str:
    return f"{bps}bit"


def _time(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}us"


def burst_bytes(rate_bps: int) -> int:
    """Token bucket depth: 1 ms of traffic, but never less than one GSO frame."""
    return max(MIN_BURST, rate_bps // 8 // 1000)


def _leaf(d: Direction) -> list[str]:
    """The qdisc that holds the queue: what the user asked for, else a FIFO."""
    q = d.queue
    kind = d.qdisc if d.qdisc not in (None, "htb", "tbf") else "fifo"
    if d.needs_netem():
        return _netem(d)
    if kind == "fifo":
        if q is not None and q.bytes is not None:
            return ["bfifo", "limit", str(q.bytes)]
        return ["pfifo", "limit", str(q.packets if q and q.packets else 1000)]
    assert kind is not None
    args = [kind]
    opts = dict(d.qdisc_options)
    if q is not None and q.packets is not None and kind in ("fq_codel", "sfq", "codel", "fq"):
        opts.setdefault("limit", q.packets)
    if q is not None and q.bytes is not None and kind == "fq_codel":
        opts.setdefault("memory_limit", q.bytes)
    for name, value in sorted(opts.items()):
        if name in ("keys", "hosts") or (name == "perturb" and _flow_filter_used(d)):
            # keys make a flow filter (see _flow_filter), which then owns the
            # perturbation: sfq ignores its own perturb behind a filter (tc-sfq(8)).
            # hosts: the wire's only.
            continue
        if isinstance(value, bool):
            args.append(name if value else f"no{name}")
        elif name in ("target", "interval", "ce_threshold"):
            args += [name, _time(float(value))]
        elif name == "perturb":
            args += [name, str(int(value))]  # whole seconds, checked at load
        else:
            args += [name, str(value)]
    return args


def _flow_filter_used(d: Direction) -> bool:
    return d.qdisc in ("fq_codel", "sfq") and "keys" in dict(d.qdisc_options)


def _flow_filter(dev: str, parent: str, d: Direction) -> list[str]:
    """tc's flow classifier in front of fq_codel or sfq when the link picks the keys
    a flow is hashed on (keys = "src": one queue per source host)."""
    if not _flow_filter_used(d):
        return []
    opts = dict(d.qdisc_options)
    # The classifier's buckets are the qdisc's: fq_codel's flows, sfq's divisor
    # (classes 1..N; the qdisc takes a class above its count as unclassified).
    buckets = opts.get("flows", 1024) if d.qdisc == "fq_codel" else opts.get("divisor", 1024)
    perturb = int(opts.get("perturb", 0))
    return [f"filter add dev {dev} parent {parent} handle 1 protocol all flow hash "
            f"keys {opts['keys']} divisor {buckets}" + (f" perturb {perturb}" if perturb else "")]


def _netem(d: Direction) -> list[str]:
    args = ["netem"]
    if d.delay_s:
        args += ["delay", _time(d.delay_s)]
        if d.jitter_s:
            args += [_time(d.jitter_s)]
    if d.loss_pct and d.loss_burst:
        # The simple Gilbert model: mean loss `loss` in bursts of `loss_burst`
        # frames; p and r from the stationary loss p/(p+r) and burst 1/r.
        loss, r = d.loss_pct / 100, 1 / d.loss_burst
        p = min(1.0, loss * r / (1 - loss)) if loss < 1 else 1.0
        args += ["loss", "gemodel", f"{p * 100:.6g}%", f"{r * 100:.6g}%"]
    elif d.loss_pct:
        args += ["loss", f"{d.loss_pct}%"]
    if d.duplicate_pct:
        args += ["duplicate", f"{d.duplicate_pct}%"]
    q = d.queue
    if q is not None and q.packets is not None:
        args += ["limit", str(q.packets)]
    elif q is not None and q.bytes is not None:
        args += ["limit", str(max(1, q.bytes // FRAME_BYTES))]
    else:
        args += ["limit", "10000"]
    return args


def tc_lines(dev: str, d: Direction) -> list[str]:
    """`tc -batch` lines for one device; empty when the direction is plain."""
    if d.is_plain():
        return []
    root = f"qdisc replace dev {dev} root handle 1:"
    if d.rate_bps is None:
        return [f"{root} {' '.join(_leaf(d))}", *_flow_filter(dev, "1:", d)]
    rate = _rate(d.rate_bps)
    burst = burst_bytes(d.rate_bps)
    if d.qdisc == "tbf" and not d.needs_netem():
        q = d.queue
        if q is not None and q.bytes is not None:
            limit = q.bytes
        elif q is not None and q.packets is not None:
            limit = q.packets * FRAME_BYTES
        else:
            limit = max(burst, d.rate_bps // 8 // 20)  # 50 ms of traffic
        return [f"{root} tbf rate {rate} burst {burst} limit {max(limit, burst)}"]
    return [
        f"{root} htb default 1 r2q 1000",
        f"class add dev {dev} parent 1: classid 1:1 htb rate {rate} ceil {rate} "
        f"burst {burst} cburst {burst}",
        f"qdisc add dev {dev} parent 1:1 handle 10: {' '.join(_leaf(d))}",
        *_flow_filter(dev, "10:", d),
    ]
