"""Where an alert may be POSTed: never to a link-local or cloud metadata address, unless
the schedule allows it (`schedule add --alert-link-local`).

A bench or a tick often runs on a cloud machine, whose metadata service
(169.254.169.254, fd00:ec2::254, ...) hands out its credentials to whoever asks from
inside: an alert URL pointing there would make hoplab ask. The rule holds for the
address a name resolves to as well, at the moment of the POST: `connect` resolves the
name once, refuses if any of its addresses is forbidden, and connects to the addresses
it checked (never resolving again, so a name cannot change its answer in between).
"""

from __future__ import annotations

import ipaddress
import socket

# Metadata services outside 169.254.0.0/16: AWS's IPv6 one, Alibaba Cloud's.
METADATA = frozenset(ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200"))
RULE = ("a link-local or metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254, "
        "100.100.100.200, or unspecified)")


class Forbidden(OSError):
    """The URL's host is, or resolves to, an address the rule refuses."""


def forbidden(address: str) -> bool:
    """Whether an alert may not go to this IP address (a literal, IPv4 or IPv6)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_link_local or ip.is_unspecified or ip in METADATA


def addresses(host: str, port: int) -> list[tuple[int, str]]:
    """Every (family, address) `host` resolves to (a literal is itself)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys((family, str(sockaddr[0])) for family, _, _, _, sockaddr
                              in found))


def check(host: str, port: int) -> list[tuple[int, str]]:
    """`host`'s addresses; Forbidden if any of them is."""
    found = addresses(host, port)
    if any(forbidden(a) for _, a in found):
        raise Forbidden(f"its host is, or resolves to, {RULE}: refused (schedule add "
                        "--alert-link-local allows it)")
    return found


def connect(host: str, port: int, timeout: float, allow: bool) -> socket.socket:
    """A TCP connection to `host` through the addresses the rule allowed."""
    found = addresses(host, port) if allow else check(host, port)
    last: OSError = OSError(f"{host} has no address")
    for family, address in found:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect((address, port))
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last
