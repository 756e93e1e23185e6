"""The UAPI text protocol of wireguard-go (https://www.wireguard.com/xplatform/).

Requests go straight to the daemon's control socket, so ``wg`` is not needed
in userspace mode.
"""

from __future__ import annotations

import socket

from hoplab.errors import LabError
from hoplab.lab.wireguard.config import (
    PeerStats,
    WgInterface,
    format_endpoint,
    format_network,
    uapi_socket,
    where,
)

#: Timeout of one UAPI exchange with a running daemon.
UAPI_TIMEOUT_S = 2.0


def configure(iface: WgInterface) -> None:
    """Set the key, the listen port and the peers of ``iface``, replacing any before."""
    here = where(iface)
    lines = [
        "set=1",
        f"private_key={iface.keys.private_hex}",
        f"listen_port={iface.listen_port}",
        "replace_peers=true",
    ]
    for peer in iface.peers:
        lines.append(f"public_key={peer.public_hex}")
        if peer.endpoint is not None:
            lines.append(f"endpoint={format_endpoint(peer.endpoint, here)}")
        if peer.keepalive is not None:
            lines.append(f"persistent_keepalive_interval={peer.keepalive}")
        lines.append("replace_allowed_ips=true")
        lines += [f"allowed_ip={format_network(n, here)}" for n in peer.allowed_ips]
    errno_of(exchange(iface, "\n".join(lines) + "\n\n"), here, "set")


def get(iface: WgInterface) -> dict[str, PeerStats]:
    """Per-peer counters of a running daemon, keyed by the peer's public key in hex."""
    return parse_get(exchange(iface, "get=1\n\n"))


def exchange(iface: WgInterface, request: str) -> str:
    """One request/response exchange on the control socket of ``iface``."""
    here = where(iface)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(UAPI_TIMEOUT_S)
    reply = b""
    try:
        conn.connect(str(uapi_socket(iface)))
        conn.sendall(request.encode("ascii"))
        # A reply ends with an empty line; the daemon keeps the connection
        # open for further requests, so EOF is not the end marker.
        while not reply.endswith(b"\n\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
    except OSError as exc:
        raise LabError(f"cannot talk to wireguard-go for {here} on {uapi_socket(iface)}: "
                       f"{exc}") from exc
    finally:
        conn.close()
    text = reply.decode(errors="replace")
    if request.startswith("get="):
        errno_of(text, here, "get")
    return text


def errno_of(reply: str, where: str, op: str) -> None:
    """Raise unless ``reply`` ends the ``op`` request with ``errno=0``."""
    for line in reply.splitlines():
        if line.startswith("errno="):
            if line != "errno=0":
                raise LabError(f"wireguard-go for {where} refused the {op} request ({line})")
            return
    raise LabError(f"wireguard-go for {where} sent no status for the {op} request")


def parse_get(reply: str) -> dict[str, PeerStats]:
    peers: dict[str, PeerStats] = {}
    current: PeerStats | None = None
    for line in reply.splitlines():
        key, _, value = line.partition("=")
        if key == "public_key":
            current = peers[value] = PeerStats(rx_bytes=0, tx_bytes=0,
                                               last_handshake_time_sec=0, endpoint=None)
        elif current is None:
            continue  # interface-level keys
        elif key == "rx_bytes":
            current["rx_bytes"] = int(value)
        elif key == "tx_bytes":
            current["tx_bytes"] = int(value)
        elif key == "last_handshake_time_sec":
            current["last_handshake_time_sec"] = int(value)
        elif key == "endpoint":
            current["endpoint"] = value
    return peers
