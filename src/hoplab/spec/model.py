"""The validated lab: frozen dataclasses that every later stage reads.

Units are normalised here so that no later stage parses strings: rates are
bits per second, times are seconds, sizes are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network

# Queue disciplines a link may ask for. The lab engine decides, per kernel,
# whether each can be built (see hoplab.lab.requirements).
QDISCS = ("fifo", "htb", "tbf", "netem", "fq_codel", "cake", "sfq", "codel", "fq", "prio")

EMULATORS = ("auto", "netem", "wire")


@dataclass(frozen=True)
class QueueLimit:
    """A drop-tail bound: either a packet count or a byte count."""

    packets: int | None = None
    bytes: int | None = None


@dataclass(frozen=True)
class Direction:
    """Impairments applied on one direction of a link (at the sender's egress)."""

    rate_bps: int | None = None
    delay_s: float | None = None
    jitter_s: float | None = None
    loss_pct: float | None = None
    queue: QueueLimit | None = None
    qdisc: str | None = None
    # Mean length of loss bursts in frames: `loss` then follows a Gilbert model.
    loss_burst: float | None = None
    duplicate_pct: float | None = None
    # With jitter, may frames overtake each other? netem always lets them.
    reorder: bool | None = None
    # A mahimahi trace of delivery opportunities (absolute path), instead of a rate.
    trace: str | None = None

    def needs_netem(self) -> bool:
        """Impairments beyond rate and queue: netem's, or the wire's."""
        return bool(self.delay_s or self.jitter_s or self.loss_pct or self.duplicate_pct
                     or self.needs_wire())

    def needs_wire(self) -> bool:
        """What only the userspace wire can do (netem has no trace, always reorders)."""
        return self.trace is not None or self.reorder is False

    def is_plain(self) -> bool:
        return self == Direction()


@dataclass(frozen=True)
class Link:
    """A point-to-point link. `forward` shapes a->b, `reverse` shapes b->a."""

    index: int
    a: str
    b: str
    forward: Direction = field(default_factory=Direction)
    reverse: Direction = field(default_factory=Direction)
    emulator: str = "auto"
    wireguard: bool = False
    mtu: int | None = None
    # Optional explicit addressing; the planner fills in the rest.
    subnet4: IPv4Network | None = None
    subnet6: IPv6Network | None = None
    addr_a4: IPv4Interface | None = None
    addr_b4: IPv4Interface | None = None
    addr_a6: IPv6Interface | None = None
    addr_b6: IPv6Interface | None = None

    @property
    def label(self) -> str:
        return f"links[{self.index}] ({self.a} <-> {self.b})"


@dataclass(frozen=True)
class Nat:
    """nftables masquerade of traffic leaving `out` (an ifname or a neighbour node)."""

    out: str


@dataclass(frozen=True)
class Node:
    name: str
    # None: decided by the planner (two or more links forward).
    forward: bool | None = None
    sysctls: tuple[tuple[str, str], ...] = ()
    # Offload settings for every interface of the node, e.g. (("gro", False),).
    offloads: tuple[tuple[str, bool], ...] = ()
    nat: Nat | None = None
    setup: tuple[tuple[str, ...], ...] = ()
    teardown: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Tunnel:
    """An end-to-end WireGuard tunnel over the routed path between two nodes."""

    name: str
    a: str
    b: str
    subnet4: IPv4Network | None = None
    subnet6: IPv6Network | None = None


_POOL4 = IPv4Network("10.200.0.0/16")
_POOL6 = IPv6Network("fd68:6c61:6200::/48")
_TUNNEL4 = IPv4Network("10.201.0.0/16")
_TUNNEL6 = IPv6Network("fd68:6c61:6201::/48")


@dataclass(frozen=True)
class Addressing:
    pool4: IPv4Network = _POOL4
    pool6: IPv6Network = _POOL6
    # Addresses for WireGuard overlays (per-hop and end-to-end tunnels).
    tunnel_pool4: IPv4Network = _TUNNEL4
    tunnel_pool6: IPv6Network = _TUNNEL6
    ipv6: bool = True


@dataclass(frozen=True)
class Lab:
    name: str
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    tunnels: tuple[Tunnel, ...] = ()
    addressing: Addressing = field(default_factory=Addressing)
    # Where the lab came from, for messages.
    source: str = "<memory>"

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)
