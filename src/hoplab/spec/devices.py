"""The device keys of a lab file: nodes reached over SSH and the links cabled to them.

A device is an existing machine (an OpenWrt router, a board, a server far away):
hoplab builds nothing on it. Its node table says how to reach it (`ssh`,
`ssh_options`) and what to change for the lab's life (`sysctls`, `offloads`,
`setup`/`teardown`); a link to it says which host NIC is cabled to it (`attach`)
and which addresses the ends have (`addresses = { client = "...", router = "..." }`).

Every value that reaches an ssh command line is checked here against a strict
pattern, so a lab file can never smuggle an option (`-oProxyCommand=...`) or a
shell word to either side; the SSH executor still quotes each argv once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv6Address,
    IPv6Interface,
    ip_address,
    ip_interface,
)
from typing import NoReturn, TypeVar

from hoplab.nodes import ssh_address as address
from hoplab.spec.locate import Path
from hoplab.spec.model import DeviceEnd, LabgridPlace, Link, SshTarget
from hoplab.spec.units import kind, parse_bool, parse_int, parse_str

SSH_OPTION_KEYS = ("port", "identity", "jump", "known_hosts")
# A labgrid place's NetworkService says the host, user and port; the rest is the file's.
LABGRID_SSH_OPTION_KEYS = ("identity", "jump", "known_hosts")
# A place's name as hoplab asks the coordinator for it (exactly, not as labgrid-client's
# pattern: "+" would be a reservation token, a substring would match other places).
PLACE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# An interface name as the kernel allows it (15 bytes, no '/', ':' or space), and not
# one that a tool would read as an option.
IFNAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,14}")
# Feature names as `ethtool -K` spells them; others are too driver-specific for veths.
OFFLOADS = ("gro", "gso", "tso", "lro", "sg", "rx", "tx", "rxvlan", "txvlan", "ntuple", "rxhash")

Fail = Callable[[Path, str], NoReturn]
T = TypeVar("T")
Addr = IPv4Address | IPv6Address
Iface = IPv4Interface | IPv6Interface


def destination(value: object) -> str:
    """user@host, host or a Host alias; checked as the SSH target checks it."""
    text = parse_str(value)
    address.split_destination(text)
    return text


def _port(value: object) -> int:
    return address.port(parse_int(value))


def _jump(value: object) -> str:
    text = parse_str(value)
    address.split_jump(text)
    return text


def _option(options: Mapping[str, object], key: str, parse: Callable[[object], T],
            path: Path, fail: Fail) -> T | None:
    if key not in options:
        return None
    try:
        return parse(options[key])
    except ValueError as e:
        fail((*path, key), str(e))


def ssh_target(dest: str, options: Mapping[str, object], path: Path, fail: Fail) -> SshTarget:
    return SshTarget(destination=dest, port=_option(options, "port", _port, path, fail),
                     jump=_option(options, "jump", _jump, path, fail),
                     identity=_option(options, "identity", _key_file, path, fail),
                     known_hosts=_option(options, "known_hosts", _key_file, path, fail))


def place(value: object) -> str:
    """A labgrid place's name."""
    text = parse_str(value)
    if not PLACE.fullmatch(text):
        raise ValueError(f"{text!r} is not a labgrid place's name (letters, digits, '.', "
                         f"'_', '-'; the name as labgrid-client places lists it)")
    return text


def coordinator(value: object) -> str:
    """A labgrid coordinator's HOST[:PORT] (labgrid's default port is 20408)."""
    text = parse_str(value)
    head, sep, tail = text.rpartition(":")
    if sep and tail.isdigit() and tail.isascii() and (head.endswith("]") or ":" not in head):
        address.port(int(tail))
        text_host = head
    else:
        text_host = text
    if ":" in text_host and not text_host.startswith("["):
        raise ValueError(f"{text!r}: write an IPv6 coordinator in brackets, e.g. "
                         f"[2001:db8::1]:20408")
    try:
        address.host(text_host)
    except ValueError:
        raise ValueError(f"{text!r} is not HOST[:PORT] of a labgrid coordinator") from None
    return text


def labgrid_place(name: str, coord: str | None, options: Mapping[str, object], path: Path,
                  fail: Fail) -> LabgridPlace:
    """A device named by a labgrid place, with the SSH options the place does not say."""
    return LabgridPlace(place=name, coordinator=coord,
                        jump=_option(options, "jump", _jump, path, fail),
                        identity=_option(options, "identity", _key_file, path, fail),
                        known_hosts=_option(options, "known_hosts", _key_file, path, fail))


def _key_file(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a file path, got {kind(value)}")
    return os.path.expanduser(address.key_file(value))


def device_offloads(table: Mapping[str, object], path: Path, fail: Fail
                    ) -> tuple[tuple[tuple[str, bool], ...], tuple[tuple[str, str, bool], ...]]:
    """A device's `offloads`: FEATURE = bool for every interface the lab uses on it, or
    IFACE = { FEATURE = bool } for one named interface (a DSA switch port, say)."""
    every: list[tuple[str, bool]] = []
    named: list[tuple[str, str, bool]] = []
    for key, value in table.items():
        where = (*path, key)
        if isinstance(value, dict):
            if not IFNAME.fullmatch(key):
                fail(where, f"'{key}' is not an interface name")
            for feat, on in value.items():
                named.append((key, _feature(feat, (*where, feat), fail),
                              _bool(on, (*where, feat), fail)))
        else:
            every.append((_feature(key, where, fail), _bool(value, where, fail)))
    return tuple(every), tuple(named)


def _feature(name: str, where: Path, fail: Fail) -> str:
    if name not in OFFLOADS:
        fail(where, f"unknown offload '{name}'; allowed: {', '.join(OFFLOADS)}, or an "
                    f"interface name with a table of them")
    return name


def _bool(value: object, where: Path, fail: Fail) -> bool:
    try:
        return parse_bool(value)
    except ValueError as e:
        fail(where, str(e))


def attach(value: object, path: Path, ends: tuple[str, str], fail: Fail
           ) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        fail(path, f'expected a table like {{ {ends[0]} = "eth1" }}, got {kind(value)}')
    out = []
    for node, nic in value.items():
        if node not in ends:
            fail((*path, node), f"'{node}' is not an end of this link ({ends[0]}, {ends[1]})")
        if not isinstance(nic, str) or not IFNAME.fullmatch(nic):
            fail((*path, node), "expected the name of a network interface of this machine, "
                                "got " + (repr(nic) if isinstance(nic, str) else kind(nic)))
        out.append((node, nic))
    return tuple(out)


def _one_address(value: object, device: bool) -> Iface | Addr:
    text = parse_str(value)
    try:
        return ip_interface(text) if "/" in text else ip_address(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4 or IPv6 address"
                         + ("" if device else " with prefix, e.g. '192.168.10.2/24'")) from None


def address_table(value: dict[str, object], path: Path, ends: tuple[str, str],
                  devices: Collection[str], ipv6: bool, fail: Fail
                  ) -> dict[str, list[tuple[Iface | Addr, Path]]]:
    """{ node = "a.b.c.d/len" } per end, or an array for both families. A namespace's
    address needs its prefix length; a device's may leave it to the other end's."""
    out: dict[str, list[tuple[Iface | Addr, Path]]] = {}
    for node, raw in value.items():
        where = (*path, node)
        if node not in ends:
            fail(where, f"'{node}' is not an end of this link ({ends[0]}, {ends[1]})")
        items = raw if isinstance(raw, list) else [raw]
        got: list[tuple[Iface | Addr, Path]] = []
        for k, item in enumerate(items):
            at = (*where, k) if isinstance(raw, list) else where
            try:
                addr = _one_address(item, node in devices)
            except ValueError as e:
                fail(at, str(e))
            if not isinstance(addr, IPv4Interface | IPv6Interface) and node not in devices:
                fail(at, f"{item!r} needs a prefix length, e.g. '{addr}/24'")
            if addr.version == 6 and not ipv6:
                fail(at, "IPv6 is disabled in [addressing] (ipv6 = false)")
            if any(a.version == addr.version for a, _ in got):
                fail(at, f"{node} has two IPv{addr.version} addresses on this link")
            got.append((addr, at))
        out[node] = got
    return out


def device_link(link: Link, given: dict[str, list[tuple[Iface | Addr, Path]]],
                devices: Collection[str], path: Path, fail: Fail) -> Link:
    """Fill a link with a device end: the namespace end's addresses, and each device
    end's address and prefix where the file (or the namespace end) tells them. What is
    left (no address: the one SSH reaches; no prefix) is read from the device at lab up."""
    from dataclasses import replace

    ns_end = next((n for n in (link.a, link.b) if n not in devices), None)
    if ns_end is not None and ns_end not in given:
        fail((*path, "addresses"), f"give {ns_end}'s address on this cable, e.g. "
                                   f'addresses = {{ {ns_end} = "192.168.10.2/24" }}: hoplab '
                                   f"plans no addresses on a device's network")
    ns_ifaces = {a.version: a for a, _ in given.get(ns_end or "", [])
                 if isinstance(a, IPv4Interface | IPv6Interface)}
    ends: list[DeviceEnd] = []
    fields: dict[str, Iface] = {}
    for node in (link.a, link.b):
        side = "a" if node == link.a else "b"
        if node not in devices:
            for version, iface in ns_ifaces.items():
                fields[f"addr_{side}{version}"] = iface
            continue
        mine = given.get(node, [])
        if not mine:
            ends.append(DeviceEnd(node))
            continue
        for addr, where in mine:
            ip = addr.ip if isinstance(addr, IPv4Interface | IPv6Interface) else addr
            plen = addr.network.prefixlen if isinstance(addr, IPv4Interface | IPv6Interface) \
                else None
            other = ns_ifaces.get(addr.version)
            if ns_end is not None and other is None:
                fail(where, f"{ns_end} has no IPv{addr.version} address on this link to "
                            f"share a subnet with {ip}")
            if other is not None:
                if plen is None:
                    plen = other.network.prefixlen
                if ip not in other.network or ip == other.ip:
                    fail(where, f"{ip} must be a different address in {ns_end}'s subnet "
                                f"{other.network}")
            ends.append(DeviceEnd(node, ip, plen))
            if plen is not None:
                fields[f"addr_{side}{addr.version}"] = ip_interface(f"{ip}/{plen}")
    for dev in (n for n in (link.a, link.b) if n in devices and given.get(n)):
        theirs = {a.version for a, _ in given[dev]}
        for version in sorted(set(ns_ifaces) - theirs):
            fail((*path, "addresses", dev), f"{ns_end} has an IPv{version} address on this "
                                            f"link; give {dev}'s IPv{version} address too")
    if ns_end is not None and len(ns_ifaces) > 1 and any(e.address is None for e in ends):
        fail((*path, "addresses", ns_end), "with the device's address left to SSH, give "
                                           f"{ns_end} one address, of SSH's family")
    return replace(link, device_ends=tuple(ends), **fields)  # type: ignore[arg-type]
