"""What hoplab-gen's fast path (whole Ethernet frames to an AF_PACKET socket, gen/) must
write that the kernel would otherwise fill in: the interface the route to the receiver
leaves by, its MAC, the source address, and the next hop's MAC, read from the neighbour
table once a ping has made the kernel resolve it.

None where the fast path cannot run: an interface that is not Ethernet (WireGuard, a
tun), or a next hop that does not answer neighbour discovery; the sender then uses UDP
sockets (the same frames on the wire, sent more slowly).
"""

from __future__ import annotations

from hoplab.nodes.executor import Executor
from hoplab.tools import ToolOutputError, iproute_json
from hoplab.tools.hoplab_gen import Link

# Pings to make the kernel resolve the next hop: the first may go while an ARP or
# neighbour solicitation is still unanswered, so a few, each given a second.
RESOLVE_TRIES = 3


def _ask(ex: Executor, argv: list[str]) -> str | None:
    done = ex.run(argv, timeout=30)
    return done.stdout if done.returncode == 0 else None


def _neighbour(ex: Executor, route: iproute_json.Route, dst: str, family: int) -> str | None:
    for _ in range(RESOLVE_TRIES):
        text = _ask(ex, iproute_json.neigh_argv(route.next_hop, route.dev))
        found = iproute_json.neighbour_mac(text) if text is not None else None
        if found is not None:
            return found
        # A refused or lost echo still makes the kernel resolve the next hop.
        ex.run(["ping", "-6" if family == 6 else "-4", "-c", "1", "-W", "1", dst],
               timeout=30)
    return None


def resolve(ex: Executor, dst: str, family: int, fallback_src: str) -> Link | None:
    """The frames' link from `ex` to `dst`, or None where the fast path cannot run."""
    try:
        text = _ask(ex, iproute_json.route_get_argv(dst))
        if text is None:
            return None
        route = iproute_json.route(text, dst)
        link = _ask(ex, iproute_json.link_argv(route.dev))
        src_mac = iproute_json.ether_mac(link) if link is not None else None
        if src_mac is None:
            return None
        nh_mac = _neighbour(ex, route, dst, family)
    except ToolOutputError:
        return None
    if nh_mac is None:
        return None
    return Link(route.dev, route.src or fallback_src, src_mac, nh_mac)
