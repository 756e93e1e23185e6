"""A device's addresses, read at lab up: the ones the lab file names must be there,
and an end with no address takes the one SSH reached the device at."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from ipaddress import IPv4Interface, IPv6Interface, ip_address, ip_interface

from hoplab.errors import LabError
from hoplab.lab.devices.errors import spec_error
from hoplab.lab.devices.tools import install_hint
from hoplab.nodes.executor import Executor
from hoplab.spec.model import Lab, Link

Iface = IPv4Interface | IPv6Interface
_IFACE_LINE = re.compile(r"^\d+:\s+([^:@\s]+)(?:@\S+)?:")
_ADDR_LINE = re.compile(r"^\s+inet6?\s+(\S+)")


@dataclass
class DeviceView:
    """What a device showed at lab up: its interfaces' addresses, and the address
    its SSH server was reached at."""
    node: str
    addrs: dict[str, list[Iface]] = field(default_factory=dict)
    reached: str | None = None

    def holder(self, addr: str) -> tuple[str, Iface] | None:
        ip = ip_address(addr)
        for name, lst in self.addrs.items():
            for a in lst:
                if a.ip == ip:
                    return name, a
        return None

    def listing(self) -> str:
        return "; ".join(f"{n} {' '.join(str(a) for a in lst)}"
                         for n, lst in self.addrs.items() if lst) or "none"


def parse_ip_addr(text: str) -> dict[str, list[Iface]]:
    """`ip addr show` of iproute2 or BusyBox: interface -> addresses with prefix."""
    out: dict[str, list[Iface]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _IFACE_LINE.match(line)
        if m is not None:
            current = m.group(1)
            out.setdefault(current, [])
            continue
        m = _ADDR_LINE.match(line)
        if m is not None and current is not None:
            try:
                out[current].append(ip_interface(m.group(1)))
            except ValueError:
                continue
    return out


def view(ex: Executor) -> DeviceView:
    got = ex.run(["ip", "addr", "show"], timeout=30)
    if got.returncode != 0:
        raise LabError(f"device {ex.node}: ip addr show failed: {got.stderr.strip()} "
                       f"({install_hint('ip')})")
    v = DeviceView(ex.node, parse_ip_addr(got.stdout))
    env = ex.run(["printenv", "SSH_CONNECTION"], timeout=30)
    fields = env.stdout.split()
    if env.returncode == 0 and len(fields) >= 3:
        v.reached = fields[2]
    return v


def resolve(lab: Lab, views: Mapping[str, DeviceView], *, after_setup: bool = False) -> Lab:
    """The lab with each device end's address, prefix and interface filled from what
    the device has; an address the file names that the device lacks is a SpecError.

    A device with setup commands may lack an address its setup makes (a WireGuard hop's,
    say): with its prefix known, it is taken as given, and checked again once the setup
    ran (`after_setup`: then a missing address is a LabError, and the lab comes down)."""
    links = [_resolve_link(lab, link, views, after_setup) if link.device_ends else link
             for link in lab.links]
    return replace(lab, links=tuple(links))


def _resolve_link(lab: Lab, link: Link, views: Mapping[str, DeviceView],
                  after_setup: bool) -> Link:
    ends = []
    fields: dict[str, Iface] = {}
    for end in link.device_ends:
        v = views[end.node]
        where = ("links", link.index, "addresses", end.node)
        addr = str(end.address) if end.address is not None else v.reached
        if addr is None:
            raise spec_error(lab, where, f"give {end.node}'s address: its SSH server did not "
                                         f"say which address it was reached at")
        held = v.holder(addr)
        # A port cabled to this machine is there before any setup; a hop between two
        # devices may be a tunnel their setup commands make.
        made_by_setup = (bool(lab.node(end.node).setup) and end.prefixlen is not None
                         and not link.attach)
        if held is None and after_setup:
            raise LabError(f"{addr} is not an address of device {end.node} after its setup "
                           f"commands (it has: {v.listing()}); {lab.source}: "
                           f"links[{link.index}].addresses.{end.node}")
        if held is None and not made_by_setup:
            said = "the address SSH reached, " if end.address is None else ""
            later = (" (an address its setup commands make needs its prefix length here)"
                     if lab.node(end.node).setup else "")
            raise spec_error(lab, where, f"{said}{addr} is not an address of device "
                                         f"{end.node} (it has: {v.listing()}){later}")
        ifname, found = held if held is not None else (None, None)
        plen = (end.prefixlen if end.prefixlen is not None else
                found.network.prefixlen if found is not None else 32)
        iface = ip_interface(f"{addr}/{plen}")
        side = "a" if end.node == link.a else "b"
        ns_end = link.b if side == "a" else link.a
        other = getattr(link, f"addr_{'b' if side == 'a' else 'a'}{iface.version}")
        if end.address is None and link.nic(ns_end) is not None:
            if other is None or iface.ip not in other.network:
                raise spec_error(lab, ("links", link.index, "addresses", ns_end),
                                 f"{ns_end}'s address must share a subnet with {addr}, the "
                                 f"address SSH reaches {end.node} at")
            iface = ip_interface(f"{addr}/{other.network.prefixlen}")
        fields[f"addr_{side}{iface.version}"] = iface
        ends.append(replace(end, address=iface.ip, prefixlen=iface.network.prefixlen,
                            ifname=ifname))
    resolved = replace(link, device_ends=tuple(ends), **fields)  # type: ignore[arg-type]
    for version in (4, 6):
        a, b = getattr(resolved, f"addr_a{version}"), getattr(resolved, f"addr_b{version}")
        if (a is None) != (b is None):
            raise spec_error(lab, ("links", link.index, "addresses"),
                             f"only one end has an IPv{version} address")
        if a is not None and b is not None and a.network != b.network and not link.attach:
            # Two devices cabled to each other: each keeps its own prefix, but the planner
            # needs one subnet per link.
            b = ip_interface(f"{b.ip}/{a.network.prefixlen}")
            if b.network != a.network:
                raise spec_error(lab, ("links", link.index, "addresses"),
                                 f"{a} and {b.ip} are not on one subnet")
            resolved = replace(resolved, **{f"addr_b{version}": b})  # type: ignore[arg-type]
    return resolved
