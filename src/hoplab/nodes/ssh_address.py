"""The one check of where an SSH node is: its destination, jump host, port and key files.

The lab loader (hoplab.spec.devices, which adds file, line and key) and the SSH target
(hoplab.nodes.ssh_target, which checks what a state file hands it) both call these, so
a value one accepts the other cannot refuse later. Every value must read as exactly
what it is: never an option (a leading "-"), a shell word, white space or a second
destination. Each function raises ValueError with a message for the user.
"""

from __future__ import annotations

import re
from ipaddress import IPv6Address

# A user name (useradd's 32 characters), and a host: a DNS name, an IPv4 address or
# a Host alias of ~/.ssh/config. IPv6 addresses are checked apart, below.
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}")
# An IPv6 zone is an interface name (15 bytes, as the kernel allows) or its index.
_ZONE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,14}")
_PATH = re.compile(r"[A-Za-z0-9_./~+][A-Za-z0-9_./+@-]{0,255}")
DESTINATION_HINT = ("user@host, host or a Host alias of ~/.ssh/config (letters, digits, "
                    "'.', '_', '-'; an IPv6 address, with an optional %zone, bare or in "
                    "brackets; no spaces or options)")
JUMP_HINT = "user@host or host:port of a jump host; an IPv6 one in brackets, [2001:db8::1]:22"


def _ipv6(text: str) -> str | None:
    """The address of an IPv6 host (with its zone), or None when `text` is not one."""
    address, sep, zone = text.partition("%")
    if sep and not _ZONE.fullmatch(zone):
        return None
    try:
        IPv6Address(address)
    except ValueError:
        return None
    return text


def host(text: str) -> str:
    """A host as written after user@: a name, an IPv4 address, or an IPv6 address (with
    an optional %zone) bare or in brackets; returned without the brackets."""
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else None
    if inner is not None:
        if _ipv6(inner) is None:
            raise ValueError(f"{text!r} is not an IPv6 address in brackets")
        return inner
    if _NAME.fullmatch(text) or (":" in text and _ipv6(text) is not None):
        return text
    raise ValueError(f"{text!r} is not a host name, an address or a Host alias")


def split_destination(dest: object) -> tuple[str | None, str]:
    """("user" or None, "host") of "user@host" or "host"."""
    if not isinstance(dest, str):
        raise ValueError(f"expected {DESTINATION_HINT}, got {dest!r}")
    user, sep, rest = dest.rpartition("@")
    if sep and not _USER.fullmatch(user):
        raise ValueError(f"{dest!r} is not {DESTINATION_HINT} ({user!r} is not a user name)")
    try:
        return (user if sep else None), host(rest)
    except ValueError:
        raise ValueError(f"{dest!r} is not {DESTINATION_HINT}") from None


def port(value: object) -> int:
    """A TCP port: an integer 1 to 65535."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ValueError(f"{value!r} is not a TCP port (1 to 65535)")
    return value


def split_jump(jump: object) -> tuple[str | None, str, int | None]:
    """(user, host, port) of a jump host "user@host[:port]". An IPv6 host must be in
    brackets: in "2001:db8::7" the last group could be read as a port."""
    if not isinstance(jump, str):
        raise ValueError(f"expected {JUMP_HINT}, got {jump!r}")
    head, sep, tail = jump.rpartition(":")
    number = None
    if sep and tail.isdigit() and tail.isascii() and (head.endswith("]") or ":" not in head):
        number = port(int(tail))
        jump = head
    rest = jump.rpartition("@")[2]
    if ":" in rest and not rest.startswith("["):
        raise ValueError(f"{jump!r}: write an IPv6 jump host in brackets, e.g. "
                         f"[2001:db8::1]:22")
    try:
        return (*split_destination(jump), number)
    except ValueError:
        raise ValueError(f"{jump!r} is not {JUMP_HINT}") from None


def key_file(value: object) -> str:
    """An identity or known_hosts file path, as written (not yet expanded)."""
    if not isinstance(value, str) or not _PATH.fullmatch(value):
        raise ValueError(f"expected a file path like '~/.ssh/lab_ed25519', got {value!r}")
    return value
