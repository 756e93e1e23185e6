"""What a WireGuard interface is made of, where its files live, and checks on it."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from hoplab.errors import LabError
from hoplab.lab.wireguard.keys import KeyPair
from hoplab.nodes.registry import in_namespace

if TYPE_CHECKING:
    from hoplab.nodes.netns_exec import NetnsExecutor

Mode = Literal["kernel", "userspace"]
MODES: tuple[Mode, ...] = ("kernel", "userspace")

# sockaddr_un.sun_path is 108 bytes including the terminating NUL.
_SUN_PATH_MAX = 107
_IFNAMSIZ = 15


@dataclass(frozen=True)
class WgPeer:
    public_hex: str
    endpoint: str | None  # "ip:port" or "[v6]:port"; None: wait for the peer
    allowed_ips: tuple[str, ...]
    keepalive: int | None = None  # persistent keepalive in seconds


@dataclass(frozen=True)
class WgInterface:
    netns: str  # name under /run/netns
    ifname: str
    keys: KeyPair
    listen_port: int  # 0: let the system choose
    peers: tuple[WgPeer, ...]
    rundir: Path  # private to the node: control socket, log, key file
    mtu: int = 1420


class PeerStats(TypedDict):
    rx_bytes: int
    tx_bytes: int
    last_handshake_time_sec: int  # 0: never
    endpoint: str | None


def uapi_socket(iface: WgInterface) -> Path:
    """Where the userspace daemon of ``iface`` takes UAPI requests."""
    return iface.rundir / f"{iface.ifname}.sock"


def log_file(iface: WgInterface) -> Path:
    """Where the userspace daemon of ``iface`` writes its stdout and stderr."""
    return iface.rundir / f"{iface.ifname}.log"


def where(iface: WgInterface) -> str:
    return f"interface {iface.ifname} in namespace {iface.netns}"


def node_of(iface: WgInterface) -> NetnsExecutor:
    """The namespace ``iface`` lives in, where its commands run."""
    return in_namespace(iface.netns, iface.netns)


def make_rundir(iface: WgInterface) -> None:
    iface.rundir.mkdir(parents=True, exist_ok=True)
    # Private to root: it holds control sockets and, briefly, a private key.
    os.chmod(iface.rundir, 0o700)


# ------------------------------------------------------------------ checks


def validate(iface: WgInterface) -> None:
    here = where(iface)
    name = iface.ifname
    if not 0 < len(name.encode()) <= _IFNAMSIZ or any(c in name for c in "/:% \t\n"):
        raise LabError(f"WireGuard {here}: bad interface name (1-15 characters, no '/', ':', "
                       "'%' or spaces)")
    if not 0 <= iface.listen_port <= 65535:
        raise LabError(f"WireGuard {here}: listen port {iface.listen_port} out of range")
    if not 68 <= iface.mtu <= 65535:
        raise LabError(f"WireGuard {here}: MTU {iface.mtu} out of range")
    _check_key(iface.keys.private_hex, f"WireGuard {here}: private key")
    _check_key(iface.keys.public_hex, f"WireGuard {here}: public key")
    sock = str(uapi_socket(iface))
    if len(os.fsencode(sock)) > _SUN_PATH_MAX:
        raise LabError(f"WireGuard {here}: control socket path {sock} is longer than the "
                       f"{_SUN_PATH_MAX} bytes a unix socket allows; use a shorter run directory")
    for peer in iface.peers:
        _check_key(peer.public_hex, f"WireGuard {here}: peer key")
        if peer.endpoint is not None:
            format_endpoint(peer.endpoint, here)
        for net in peer.allowed_ips:
            format_network(net, here)
        if peer.keepalive is not None and not 0 <= peer.keepalive <= 65535:
            raise LabError(f"WireGuard {here}: keepalive {peer.keepalive} out of range")


def _check_key(key_hex: str, what: str) -> None:
    try:
        ok = len(bytes.fromhex(key_hex)) == 32 and len(key_hex) == 64
    except ValueError:
        ok = False
    if not ok:
        raise LabError(f"{what} is not 64 hex digits")


def format_endpoint(endpoint: str, where: str) -> str:
    """``ip:port`` or ``[v6]:port`` in canonical form; names are refused.

    wireguard-go's UAPI only takes literal addresses, and a bare IPv6 address
    without brackets is ambiguous with the port.
    """
    host, sep, port_s = endpoint.rpartition(":")
    try:
        if not sep:
            raise ValueError
        port = int(port_s)
        if not 0 < port <= 65535:
            raise ValueError
        if host.startswith("[") and host.endswith("]"):
            return f"[{ipaddress.IPv6Address(host[1:-1])}]:{port}"
        return f"{ipaddress.IPv4Address(host)}:{port}"
    except ValueError:
        raise LabError(f"WireGuard {where}: endpoint {endpoint!r} is not 'ip:port' or "
                       "'[ipv6]:port'") from None


def format_network(net: str, where: str) -> str:
    try:
        return str(ipaddress.ip_network(net, strict=False))
    except ValueError:
        raise LabError(f"WireGuard {where}: allowed IP {net!r} is not a network") from None
