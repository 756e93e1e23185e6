"""iproute2's JSON answers (`ip -j`) that a frame generator needs: the interface and next
hop a node routes an address through, an interface's MAC address, a neighbour's MAC.

A raw frame generator (trafgen) writes whole Ethernet frames, so it must be told what
the kernel would have filled in: the source MAC of the interface the route leaves by and
the destination MAC of the next hop (the gateway, or the destination itself on-link).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hoplab.tools import ToolOutputError


@dataclass(frozen=True)
class Route:
    dev: str
    next_hop: str       # the gateway, or the destination when it is on-link
    src: str | None = None  # the source address the kernel would choose (prefsrc)


def _list(tool: str, text: str) -> list[dict[str, Any]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise ToolOutputError(f"{tool}: not JSON: {text[:200]!r}") from None
    if not isinstance(doc, list) or not all(isinstance(x, dict) for x in doc):
        raise ToolOutputError(f"{tool}: expected a JSON list of objects: {text[:200]!r}")
    return doc


def route_get_argv(address: str) -> list[str]:
    return ["ip", "-j", "route", "get", address]


def route(text: str, address: str) -> Route:
    """The route `ip -j route get ADDRESS` answered."""
    for r in _list("ip route get", text):
        if isinstance(r.get("dev"), str):
            src = r.get("prefsrc")
            return Route(dev=r["dev"], next_hop=str(r.get("gateway") or address),
                         src=src if isinstance(src, str) else None)
    raise ToolOutputError(f"ip route get {address}: no route with a device: {text[:200]!r}")


def link_argv(dev: str) -> list[str]:
    return ["ip", "-j", "link", "show", "dev", dev]


def mac(text: str, dev: str) -> str:
    """The MAC address of `dev` from `ip -j link show dev DEV`."""
    for link in _list("ip link", text):
        addr = link.get("address")
        if isinstance(addr, str) and addr.count(":") == 5:
            return addr
    raise ToolOutputError(f"ip link show {dev}: no MAC address: {text[:200]!r}")


def ether_mac(text: str) -> str | None:
    """The MAC address of an Ethernet interface from `ip -j link show dev DEV`; None for
    one of another type (WireGuard, a tun: no Ethernet header to write)."""
    for link in _list("ip link", text):
        addr = link.get("address")
        if link.get("link_type") == "ether" and isinstance(addr, str) and addr.count(":") == 5:
            return addr
    return None


def neigh_argv(address: str, dev: str) -> list[str]:
    return ["ip", "-j", "neigh", "show", "to", address, "dev", dev]


def neighbour_mac(text: str) -> str | None:
    """The neighbour's MAC from `ip -j neigh show to ADDR dev DEV`, None while it is not
    resolved (no entry, INCOMPLETE or FAILED)."""
    for n in _list("ip neigh", text):
        addr = n.get("lladdr")
        if isinstance(addr, str) and addr.count(":") == 5:
            return addr
    return None
