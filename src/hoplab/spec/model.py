"""The validated lab: frozen dataclasses that every later stage reads.

Units are normalised here so that no later stage parses strings: rates are
bits per second, times are seconds, sizes are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
)

from hoplab.nodes import registry

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
    # The qdisc's options, tc's names, sorted (see hoplab.spec.qdisc_options).
    qdisc_options: tuple[tuple[str, str | int | float | bool], ...] = ()
    # A ceiling in wire-size frames per second (a CPU-bound router's packet rate): only
    # the userspace wire has one (a GSO super-frame counts as its segments).
    pps: int | None = None

    def needs_netem(self) -> bool:
        """Impairments beyond rate and queue: netem's, or the wire's."""
        return bool(self.delay_s or self.jitter_s or self.loss_pct or self.duplicate_pct
                     or self.needs_wire())

    def needs_wire(self) -> bool:
        """What only the userspace wire can do (netem has no trace, always reorders)."""
        return self.trace is not None or self.reorder is False or self.pps is not None

    def is_plain(self) -> bool:
        return self == Direction()


@dataclass(frozen=True)
class DeviceEnd:
    """A device's end of a link: the device's own address, which hoplab checks (present
    on the device) and never sets. `address` None: the address SSH reaches the device
    at. `prefixlen` None: the prefix the device has on that address, read at lab up."""

    node: str
    address: IPv4Address | IPv6Address | None = None
    prefixlen: int | None = None
    # The device's interface holding the address: read at lab up.
    ifname: str | None = None


@dataclass(frozen=True)
class Link:
    """A point-to-point link. `forward` shapes a->b, `reverse` shapes b->a.

    A link between two namespaces is a veth pair. A link with a device end (a node
    reached over SSH) is a cable: the namespace end is a host NIC (`attach`) moved
    into the namespace for the lab's life, the device end is whatever the device has.
    """

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
    # (namespace node, host NIC) for each end cabled to a device.
    attach: tuple[tuple[str, str], ...] = ()
    # The device ends, whose addresses the lab engine reads and checks at lab up.
    device_ends: tuple[DeviceEnd, ...] = ()

    def nic(self, node: str) -> str | None:
        """The host NIC attached for `node`'s end, None for a veth or a device end."""
        return next((nic for n, nic in self.attach if n == node), None)

    def device_end(self, node: str) -> DeviceEnd | None:
        return next((d for d in self.device_ends if d.node == node), None)

    @property
    def is_cable(self) -> bool:
        """Joins a device: hoplab creates no veth for it and shapes nothing on it."""
        return bool(self.device_ends or self.attach)

    @property
    def label(self) -> str:
        return f"links[{self.index}] ({self.a} <-> {self.b})"


@dataclass(frozen=True)
class Nat:
    """nftables masquerade of traffic leaving `out` (an ifname or a neighbour node)."""

    out: str


@dataclass(frozen=True)
class SshTarget:
    """How to reach a device: `destination` as written ("user@host", or a Host alias of
    ~/.ssh/config), and the options given beside it."""

    destination: str
    port: int | None = None
    identity: str | None = None  # a private key file, "~" expanded
    jump: str | None = None      # "user@bastion", as ssh -J takes it
    known_hosts: str | None = None  # else ~/.ssh/known_hosts, "~" expanded

    @property
    def user(self) -> str | None:
        return self.destination.rsplit("@", 1)[0] if "@" in self.destination else None

    @property
    def host(self) -> str:
        return self.destination.rsplit("@", 1)[-1]


@dataclass(frozen=True)
class LabgridPlace:
    """A device found through labgrid: the place hoplab reserves and acquires for the
    lab's life (hoplab.lab.devices.labgrid), whose NetworkService resource says where its
    SSH server is (host, user, port). The other SSH options are the lab file's."""

    place: str
    # HOST[:PORT] of the coordinator; None: $LG_COORDINATOR, else labgrid's default.
    coordinator: str | None = None
    identity: str | None = None
    jump: str | None = None
    known_hosts: str | None = None


@dataclass(frozen=True)
class VmSpec:
    """A virtual machine hoplab boots for a node (hoplab.lab.vm): `kernel` is
    "debian:RELEASE" or the absolute path of a bzImage (with `modules`, its
    lib/modules/RELEASE directory); or `image`, a firmware's own disk image, which boots
    itself and is reached over SSH at its `management` address as `user`, with
    `identity` and, if given, checked against `host_key`."""

    kernel: str | None = None
    modules: str | None = None
    image: str | None = None
    user: str = "root"
    identity: str | None = None
    host_key: str | None = None
    management: str = "192.168.1.1/24"
    vcpus: int = 2
    memory_mib: int = 512
    # The share of one host CPU each vCPU may use (a small SoC), None: unlimited.
    cpu_pct: float | None = None


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
    # A device reached over SSH: hoplab builds nothing on it and changes only what the
    # file asks (sysctls, offloads, setup), restoring it at lab down.
    ssh: SshTarget | None = None
    # Device offloads for one named interface: (interface, feature, on).
    iface_offloads: tuple[tuple[str, str, bool], ...] = ()
    # A device named by a labgrid place: `ssh` is filled from the place at lab up.
    labgrid: LabgridPlace | None = None
    # A virtual machine hoplab boots (node kind "vm").
    vm: VmSpec | None = None

    @property
    def kind(self) -> str:
        """Its kind of node: the one the node kind registry (hoplab.nodes.registry)
        says the lab file's keys declare."""
        keys = [k for k in ("ssh", "labgrid", "vm") if getattr(self, k) is not None]
        return registry.declared(keys)

    @property
    def node_kind(self) -> registry.NodeKind:
        """Its kind's entry in that registry (who builds it, where its links end, whether
        it is a namespace of this machine), carried by the node: the lab engine and the
        orchestrator read it of the node they hold instead of asking the registry again
        by the kind's name, in the middle of their own work."""
        return registry.kind(self.kind, self.name)

    @property
    def reached_by(self) -> str:
        """The lab file's key that says how a device is reached, for messages."""
        return "labgrid" if self.labgrid is not None else "ssh"


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
    # Trust a device's host key the first time it is seen (it is then pinned).
    accept_new_host_keys: bool = False

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def devices(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.ssh is not None or n.labgrid is not None)
