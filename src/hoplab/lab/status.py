"""What is up right now: labs from their records, checked against the kernel."""

from __future__ import annotations

from typing import Any

from hoplab.errors import LabError
from hoplab.lab.state import LabState, all_states
from hoplab.nodes import netns
from hoplab.nodes.registry import in_namespace, kind_of
from hoplab.tools import netlink_lib


def _links_state(node: str, ns: str) -> dict[str, str]:
    # Imported here: pyroute2 costs ~0.1 s to import, which every other command
    # would pay at start-up for nothing.
    netlink_lib.load()
    from pyroute2 import IPRoute

    with in_namespace(node, ns).inside(), IPRoute() as ipr:
        out = {}
        for msg in ipr.get_links():
            name = msg.get_attr("IFLA_IFNAME")
            if name != "lo":
                out[name] = str(msg.get_attr("IFLA_OPERSTATE")).lower()
        return out


def lab_status(state: LabState, *, links: bool = True) -> dict[str, Any]:
    nodes = state.summary.get("nodes", {})
    out_nodes: dict[str, Any] = {}
    problems: list[str] = []
    for name, info in nodes.items():
        ns = info["netns"]
        if not kind_of(name, info).local:
            # A machine of its own (a device): status does not connect to it; its
            # interfaces are its own.
            out_nodes[name] = {**info, "present": True, "link_state": {}}
            continue
        present = netns.exists(ns)
        ifstate: dict[str, str] = {}
        if present and links:
            try:
                ifstate = _links_state(name, ns)
            except LabError:
                # Gone between the two looks: another command took the lab down as
                # this one read it (a CI run: `lab status` failed on another's lab).
                present = False
        if not present:
            problems.append(f"namespace {ns} is missing")
        for iface in info["interfaces"]:
            st = ifstate.get(iface["name"], "missing" if present else "-")
            iface = dict(iface)
            if links and present and st not in ("up", "unknown"):
                problems.append(f"{name}/{iface['name']} is {st}")
        out_nodes[name] = {**info, "present": present, "link_state": ifstate}
    # A process on another machine cannot be looked up here.
    elsewhere = {n for n, info in nodes.items() if not kind_of(n, info).local}
    procs = [{"pid": p.pid, "node": p.node, "role": p.role, "alive": p.alive()}
             for p in state.processes if p.node not in elsewhere]
    problems += [f"{p['role']} on {p['node']} (pid {p['pid']}) is not running"
                 for p in procs if not p["alive"]]
    link_rows = [dict(lk) for lk in state.summary.get("links", [])]
    alive = {p["node"]: p["alive"] for p in procs}
    for w in state.summary.get("wires", []):
        up = bool(alive.get(w["name"], False)) and netns.exists(w["netns"])
        for lk in link_rows:
            if lk["index"] == w["link"]:
                # A wire that is gone carries nothing: the link is down even though
                # every interface still says up.
                lk["wire"] = {"netns": w["netns"], "stats": w["stats"], "running": up}
        if not up:
            problems.append(f"{w['label']} is down: its wire ({w['netns']}) is not running")
    return {
        "name": state.name,
        "source": state.source,
        "status": state.status if not problems or state.status != "up" else "degraded",
        "created": state.created,
        "nodes": out_nodes,
        "links": link_rows,
        "tunnels": state.summary.get("tunnels", []),
        "processes": procs,
        "problems": problems,
    }


def status_all() -> list[dict[str, Any]]:
    return [lab_status(s) for s in all_states()]
