"""A plan as plain JSON data, kept in the lab's state record for `lab status`, and each
node's entry in it: what the executor registry (hoplab.nodes.registry) needs to reach
the node, from a later process too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hoplab.nodes.registry import builds, is_local
from hoplab.spec.model import Direction

if TYPE_CHECKING:
    # Only annotations: Plan.node_entries comes here.
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


def node_entries(plan: Plan) -> dict[str, dict[str, Any]]:
    lab = plan.lab
    nodes: dict[str, Any] = {}
    for n in plan.nodes:
        spec = lab.node(n.name)
        nodes[n.name] = {
            "netns": n.netns,
            "forward": n.forward,
            "ipv4": str(n.primary4) if n.primary4 else None,
            "ipv6": str(n.primary6) if n.primary6 else None,
            "interfaces": [
                {"name": i.name, "kind": i.kind, "peer": i.peer, "link": i.link,
                 "addresses": [a.with_prefixlen for a in i.addrs]}
                for i in n.ifaces
            ],
            "routes": len(n.routes),
            "nat": spec.nat.out if spec.nat else None,
            "teardown": [list(c) for c in spec.teardown],
        }
        if builds(spec.kind) == "qemu":
            # Booted by hoplab.lab.vm, which records how to reach it (its SSH port, keys)
            # and what it is (kernel release, vCPUs, accelerator) in the lab's record.
            nodes[n.name].update({"kind": spec.kind, "netns": None,
                                  **_booted(lab.name, n.name)})
        elif not is_local(spec.kind):
            from hoplab.lab.devices.reach import ssh_entry

            # Reached over SSH (hoplab.nodes.registry); its teardown commands run from the
            # state's device record, with its settings put back (lab.devices.settings).
            nodes[n.name].update(ssh_entry(spec, lab), netns=None, teardown=[])
    return nodes


def _booted(lab: str, node: str) -> dict[str, Any]:
    from hoplab.lab.state import find

    state = find(lab)
    entry = state.summary.get("nodes", {}).get(node, {}) if state is not None else {}
    return {k: entry[k] for k in ("ssh", "vm") if k in entry}


def summarize(plan: Plan) -> dict[str, Any]:
    lab = plan.lab
    links = [
        {"index": lk.index, "between": [lk.a, lk.b], "wireguard": lk.wireguard,
         "forward": _direction(lk.forward), "reverse": _direction(lk.reverse)}
        for lk in lab.links
    ]
    tunnels = [{"name": t.name, "between": [t.a, t.b]} for t in lab.tunnels]
    return {"nodes": node_entries(plan), "links": links, "tunnels": tunnels}
