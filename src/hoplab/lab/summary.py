"""A plan as plain JSON data, kept in the lab's state record for `lab status`. Each
node's entry in it is the plan's own (Plan.node_entries: what the executor registry
needs to reach the node), so this module depends on the plan and never the reverse."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hoplab.spec.model import Direction

if TYPE_CHECKING:
    from hoplab.lab.plan import Plan


def _direction(d: Direction) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if d.rate_bps is not None:
        out["rate_bps"] = d.rate_bps
    if d.delay_s is not None:
        out["delay_s"] = d.delay_s
    if d.jitter_s is not None:
        out["jitter_s"] = d.jitter_s
    if d.loss_pct is not None:
        out["loss_pct"] = d.loss_pct
    if d.qdisc is not None:
        out["qdisc"] = d.qdisc
    for key in ("loss_burst", "duplicate_pct", "reorder", "trace"):
        value = getattr(d, key)
        if value is not None:
            out[key] = value
    if d.queue is not None:
        out["queue"] = {"packets": d.queue.packets, "bytes": d.queue.bytes}
    if d.qdisc_options:
        out["qdisc_options"] = dict(d.qdisc_options)
    return out


def summarize(plan: Plan) -> dict[str, Any]:
    lab = plan.lab
    links = [
        {"index": lk.index, "between": [lk.a, lk.b], "wireguard": lk.wireguard,
         "forward": _direction(lk.forward), "reverse": _direction(lk.reverse)}
        for lk in lab.links
    ]
    tunnels = [{"name": t.name, "between": [t.a, t.b]} for t in lab.tunnels]
    return {"nodes": plan.node_entries(), "links": links, "tunnels": tunnels}
