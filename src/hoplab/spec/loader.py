"""Read a lab file: TOML in, a validated frozen Lab out, or exactly one SpecError.

Validation stops at the first problem, and every message names the file, the
line (found by hoplab.spec.locate, since tomllib keeps none) and the key path
written as in the docs, e.g. ``links[2].rate`` or ``nodes.r1.nat.out``.
The format is described in docs/lab-format.md.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from difflib import get_close_matches
from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network
from pathlib import Path as FsPath
from typing import Any, NoReturn, ParamSpec, TypeVar

# By their full names: `from hoplab.spec import devices` names the package too, whose
# __init__ loads this module on first use (an import cycle, tests/unit/test_layers.py).
import hoplab.spec.devices as dev
import hoplab.spec.generate as gen
import hoplab.spec.names as names
import hoplab.spec.vm as vm_spec
from hoplab import user_files
from hoplab.errors import SpecError
from hoplab.spec.locate import Locator, Path, split_syntax_error
from hoplab.spec.model import (
    EMULATORS,
    QDISCS,
    Addressing,
    Direction,
    Lab,
    LabgridPlace,
    Link,
    Nat,
    Node,
    QueueLimit,
    SshTarget,
    Tunnel,
    VmSpec,
)
from hoplab.spec.qdisc_options import misfit as qdisc_misfit
from hoplab.spec.qdisc_options import parse_options as parse_qdisc_options
from hoplab.spec.qdisc_options import queue_misfit as qdisc_queue_misfit
from hoplab.spec.qdisc_options import rate_misfit as qdisc_rate_misfit
from hoplab.spec.units import (
    choice,
    kind,
    network,
    parse_bool,
    parse_burst,
    parse_command,
    parse_delay,
    parse_interface,
    parse_mtu,
    parse_percent,
    parse_pps,
    parse_queue,
    parse_rate,
    parse_str,
)

T = TypeVar("T")
P = ParamSpec("P")
N = TypeVar("N", IPv4Network, IPv6Network)
Net = IPv4Network | IPv6Network
Iface = IPv4Interface | IPv6Interface

_TOP_KEYS = ("name", "nodes", "links", "generate", "link_defaults", "tunnels", "addressing",
             "accept_new_host_keys")
_NODE_KEYS = ("forward", "sysctls", "offloads", "nat", "setup", "teardown", "ssh", "ssh_options",
              "labgrid", "labgrid_coordinator", "vm")
# What a device's node table may not ask: hoplab builds nothing on a device.
_NOT_ON_DEVICES = {
    "forward": 'set sysctls = { "net.ipv4.ip_forward" = 1 } if the device should forward',
    "nat": "masquerade with a setup command on the device (nft or iptables)",
}
_LINK_OPTION_KEYS = ("rate", "pps", "delay", "jitter", "loss", "loss_burst", "duplicate", "reorder",
                     "trace", "queue", "qdisc", "qdisc_options", "emulator",
                     "wireguard", "mtu", "forward", "reverse")
_LINK_KEYS = ("between", *_LINK_OPTION_KEYS, "subnet4", "subnet6", "addresses", "attach")
# Keys a cable to a device cannot honour: hoplab builds and shapes nothing on it.
_NOT_ON_CABLES = ("wireguard", "mtu", "subnet4", "subnet6", "emulator")
_TUNNEL_KEYS = ("name", "between", "type", "subnet4", "subnet6")
_ADDRESSING_KEYS = ("pool4", "pool6", "tunnel_pool4", "tunnel_pool6", "ipv6")
OFFLOADS = dev.OFFLOADS

_TUNNEL_NAME = re.compile(r"[a-z0-9]{1,8}")
_SYSCTL = re.compile(r"[a-z0-9_-]+(?:[./][a-z0-9_-]+)*")
_IFNAME = re.compile(r"[^\s/:]{1,15}")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_DUP_NODE = re.compile(r"Cannot declare \('nodes', '([^']*)'\) twice")


def key_name(path: Sequence[str | int]) -> str:
    """("links", 2, "rate") -> "links[2].rate"; keys that need quotes in TOML get them."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = part if _BARE_KEY.fullmatch(part) else '"' + part.replace('"', '\\"') + '"'
        out += f".{text}" if out else text
    return out


_DIRECTION_FIELDS: dict[str, tuple[str, Callable[[object], object]]] = {
    "rate": ("rate_bps", parse_rate),
    "delay": ("delay_s", parse_delay),
    "jitter": ("jitter_s", parse_delay),
    "loss": ("loss_pct", parse_percent),
    "loss_burst": ("loss_burst", parse_burst),
    "duplicate": ("duplicate_pct", parse_percent),
    "reorder": ("reorder", parse_bool),
    "trace": ("trace", parse_str),
    "queue": ("queue", parse_queue),
    "qdisc": ("qdisc", choice(QDISCS)),
    "qdisc_options": ("qdisc_options", parse_qdisc_options),
    "pps": ("pps", parse_pps),
}
_LINK_FIELDS: dict[str, Callable[[object], object]] = {
    "emulator": choice(EMULATORS), "wireguard": parse_bool, "mtu": parse_mtu,
}

# A parsed value and where it was written, so a later cross-check can point at it.
_Layer = dict[str, tuple[object, Path]]


def _pick(layer: _Layer, key: str, kind: type[T]) -> T | None:
    if key not in layer:
        return None
    value = layer[key][0]
    assert isinstance(value, kind)
    return value


@dataclass
class _Options:
    """Link options from [link_defaults] or one [[links]] entry, already parsed."""

    base: _Layer = field(default_factory=dict)
    forward: _Layer = field(default_factory=dict)
    reverse: _Layer = field(default_factory=dict)
    link: _Layer = field(default_factory=dict)


class _Noted(Exception):
    """A part of a file whose problems a check has noted: the part is left out."""


class _Ctx:
    """Where a file's values came from, to turn a bad value into one SpecError.

    Loading stops at the first problem. A check (`hoplab check`) gives a list as
    `problems` instead: each part of the file that stands on its own (a node, a link,
    a test, a variant) then notes its first problem there and the check goes on with
    the next part (attempt(), note()), so one run names every part that is wrong."""

    def __init__(self, text: str, source: str,
                 problems: list[SpecError] | None = None) -> None:
        self.text = text
        self.source = source
        self.problems = problems
        self._locator: Locator | None = None

    def error(self, path: Path, message: str) -> SpecError:
        if self._locator is None:
            self._locator = Locator(self.text)
        return SpecError(message, file=self.source, key=key_name(path) or None,
                         line=self._locator.line(path))

    def fail(self, path: Path, message: str) -> NoReturn:
        raise self.error(path, message)

    def note(self, path: Path, message: str) -> None:
        """A problem that leaves the rest of its part readable: noted in a check, raised
        in a load."""
        if self.problems is None:
            self.fail(path, message)
        self.problems.append(self.error(path, message))

    def attempt(self, instead: T, part: Callable[P, T], *args: P.args,
                **kwargs: P.kwargs) -> T:
        """part(*args, **kwargs); in a check, its SpecError is noted and `instead` stands
        for what it would have made, so the parts after it are still checked."""
        if self.problems is None:
            return part(*args, **kwargs)
        try:
            return part(*args, **kwargs)
        except SpecError as e:
            self.problems.append(e)
        except _Noted:
            pass
        return instead

    def noted(self) -> int:
        return len(self.problems or ())

    def stop_if_noted(self, before: int) -> None:
        """In a check, leave out the part whose keys were noted since `before` (each was
        named already), so nothing is judged against a value that is not there."""
        if self.noted() > before:
            raise _Noted


    def conv(self, path: Path, parse: Callable[[object], T], value: object) -> T:
        try:
            return parse(value)
        except ValueError as e:
            self.fail(path, str(e))

    def table(self, value: object, path: Path, allowed: Sequence[str] | None) -> dict[str, object]:
        if not isinstance(value, dict):
            self.fail(path, f"expected a table, got {kind(value)}")
        if allowed is None:
            return value
        for key in value:
            if key not in allowed:
                hint = get_close_matches(key, allowed, n=1)
                did = f" (did you mean '{hint[0]}'?)" if hint else ""
                self.note((*path, key), f"unknown key{did}; allowed keys: {', '.join(allowed)}")
        return {k: v for k, v in value.items() if k in allowed}

    def array(self, value: object, path: Path) -> list[object]:
        if not isinstance(value, list):
            self.fail(path, f"expected an array, got {kind(value)}")
        return value

    def pair(self, value: object, path: Path, nodes: Collection[str]) -> tuple[str, str]:
        if not (isinstance(value, list) and len(value) == 2
                and all(isinstance(v, str) for v in value)):
            self.fail(path, f'expected two node names like ["r1", "r2"], got {kind(value)}')
        a, b = str(value[0]), str(value[1])
        if a == b:
            self.fail(path, f"needs two different nodes, got '{a}' twice")
        for name in (a, b):
            if name not in nodes:
                hint = get_close_matches(name, list(nodes), n=1)
                did = f" (did you mean '{hint[0]}'?)" if hint else ""
                self.fail(path, f"unknown node '{name}'{did}")
        return a, b


def _options(ctx: _Ctx, table: dict[str, object], path: Path) -> _Options:
    opts = _Options()
    before = ctx.noted()
    for key, value in table.items():
        ctx.attempt(None, _option, ctx, opts, key, value, (*path, key))
    # In a check each bad key is named; the link is then left out, not judged without it.
    ctx.stop_if_noted(before)
    return opts


def _option(ctx: _Ctx, opts: _Options, key: str, value: object, where: Path) -> None:
    if key in _DIRECTION_FIELDS:
        name, parse = _DIRECTION_FIELDS[key]
        opts.base[name] = (ctx.conv(where, parse, value), where)
    elif key in _LINK_FIELDS:
        opts.link[key] = (ctx.conv(where, _LINK_FIELDS[key], value), where)
    elif key in ("forward", "reverse"):
        layer = opts.forward if key == "forward" else opts.reverse
        for sub, sub_value in ctx.table(value, where, tuple(_DIRECTION_FIELDS)).items():
            name, parse = _DIRECTION_FIELDS[sub]
            layer[name] = (ctx.conv((*where, sub), parse, sub_value), (*where, sub))


def _direction(ctx: _Ctx, layers: Iterable[_Layer], label: str) -> Direction:
    merged: _Layer = {}
    for layer in layers:
        merged.update(layer)
    if "jitter_s" in merged and "delay_s" not in merged:
        ctx.fail(merged["jitter_s"][1], f"jitter needs a delay on the same direction ({label}); "
                                        f'add e.g. delay = "20ms"')
    if "loss_burst" in merged and not merged.get("loss_pct", (0.0,))[0]:
        ctx.fail(merged["loss_burst"][1], f"loss_burst needs a loss on the same direction "
                                          f'({label}); add e.g. loss = "1%"')
    if "trace" in merged and "rate_bps" in merged:
        ctx.fail(merged["trace"][1], f"trace and rate exclude each other ({label}): the trace "
                                     "sets the capacity")
    if "trace" in merged and "pps" in merged:
        ctx.fail(merged["pps"][1], f"trace and pps exclude each other ({label}): the trace "
                                   "sets the capacity")
    if "qdisc_options" in merged:
        why = qdisc_misfit(_pick(merged, "qdisc", str), _pick(merged, "qdisc_options", tuple) or ())
        if why is not None:
            ctx.fail(merged["qdisc_options"][1], f"{why} ({label})")
    queue = _pick(merged, "queue", QueueLimit)
    in_bytes = queue is not None and queue.bytes is not None
    why = qdisc_queue_misfit(_pick(merged, "qdisc", str), in_bytes)
    if why is not None:
        ctx.fail(merged["queue"][1], f"{why} ({label})")
    why = qdisc_rate_misfit(_pick(merged, "qdisc", str), _pick(merged, "rate_bps", int),
                            queue is not None)
    if why is not None:
        ctx.fail(merged["rate_bps"][1], f"{why} ({label})")
    trace = _pick(merged, "trace", str)
    if trace is not None:
        trace = _trace_path(ctx, trace, merged["trace"][1])
    return Direction(rate_bps=_pick(merged, "rate_bps", int),
                     delay_s=_pick(merged, "delay_s", float),
                     jitter_s=_pick(merged, "jitter_s", float),
                     loss_pct=_pick(merged, "loss_pct", float),
                     queue=_pick(merged, "queue", QueueLimit),
                     qdisc=_pick(merged, "qdisc", str),
                     loss_burst=_pick(merged, "loss_burst", float),
                     duplicate_pct=_pick(merged, "duplicate_pct", float),
                     reorder=_pick(merged, "reorder", bool), trace=trace,
                     qdisc_options=_pick(merged, "qdisc_options", tuple) or (),
                     pps=_pick(merged, "pps", int))


def _trace_path(ctx: _Ctx, trace: str, where: Path) -> str:
    """A trace file, relative to the lab file; checked now so a typo fails at load."""
    base = FsPath(ctx.source).parent if ctx.source.endswith(".toml") else FsPath(".")
    path = os.path.abspath(base / trace)
    try:
        check_trace(user_files.read_text(FsPath(path)))
    except OSError as exc:
        ctx.fail(where, f"cannot read trace file {path}: {exc.strerror}")
    except UnicodeDecodeError as exc:
        ctx.fail(where, f"trace file {path}: not UTF-8 text (byte {exc.start})")
    except ValueError as exc:  # FileRefused, or check_trace's own
        ctx.fail(where, f"trace file {path}: {exc}")
    return path


def check_trace(text: str) -> None:
    """The mahimahi format: one delivery opportunity per line, its time in ms,
    non-decreasing; the last time is the period. A message names the line, never quotes
    it: the file may be anybody's (a bench's /etc/shadow named as a trace)."""
    last = -1
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not line.isdigit():
            raise ValueError(f"line {n}: expected a time in ms (digits only)")
        if int(line) < last:
            raise ValueError(f"line {n}: its time comes before the previous line's")
        last = int(line)
    if last <= 0:
        raise ValueError("no delivery opportunities after 0 ms (the last time is the period)")


def _link(ctx: _Ctx, index: int, ends: tuple[str, str], defaults: _Options,
          own: _Options) -> Link:
    a, b = ends
    # Explicit link keys beat every default, even a per-direction one.
    forward = _direction(ctx, (defaults.base, defaults.forward, own.base, own.forward),
                         f"forward, {a} -> {b}")
    reverse = _direction(ctx, (defaults.base, defaults.reverse, own.base, own.reverse),
                         f"reverse, {b} -> {a}")
    opts = {**defaults.link, **own.link}
    return Link(index=index, a=a, b=b, forward=forward, reverse=reverse,
                emulator=_pick(opts, "emulator", str) or "auto",
                wireguard=bool(_pick(opts, "wireguard", bool)), mtu=_pick(opts, "mtu", int))


def _addresses(ctx: _Ctx, value: object, path: Path, subnets: dict[int, Net | None],
               ipv6: bool) -> list[tuple[Iface, Iface]]:
    """The (side a, side b) interface pair of each address family listed."""
    by_family: dict[int, list[tuple[Iface, Path]]] = {4: [], 6: []}
    for k, item in enumerate(ctx.array(value, path)):
        iface = ctx.conv((*path, k), parse_interface, item)
        if iface.version == 6 and not ipv6:
            ctx.fail((*path, k), "IPv6 is disabled in [addressing] (ipv6 = false)")
        by_family[iface.version].append((iface, (*path, k)))
    out: list[tuple[Iface, Iface]] = []
    for version, pair in by_family.items():
        if not pair:
            continue
        if len(pair) != 2:
            ctx.fail(path, f"list exactly two IPv{version} addresses (side a, then side b), "
                           f"got {len(pair)}")
        (x, _), (y, where_y) = pair
        if x.network != y.network or x.ip == y.ip:
            ctx.fail(where_y, f"{y} must be a different address in the same subnet as {x}")
        for iface, where in pair:
            net = iface.network
            if version == 4 and net.prefixlen <= 30 and iface.ip in (net.network_address,
                                                                      net.broadcast_address):
                ctx.fail(where, f"{iface.ip} is the network or broadcast address of {net}")
        subnet = subnets[version]
        if subnet is not None and x.network != subnet:
            ctx.fail(pair[0][1], f"{x} is not in subnet{version} = {subnet}")
        out.append((x, y))
    return out


def _explicit_link(ctx: _Ctx, raw: object, path: Path, index: int, nodes: Collection[str],
                   defaults: _Options, ipv6: bool, devices: Collection[str] = ()) -> Link:
    table = ctx.table(raw, path, _LINK_KEYS)
    if "between" not in table:
        ctx.fail(path, 'missing required key "between" (the two nodes this link joins)')
    ends = ctx.pair(table["between"], (*path, "between"), nodes)
    own = _options(ctx, table, path)
    if any(e in devices for e in ends):
        return _cable(ctx, table, path, _link(ctx, index, ends, defaults, own), devices, ipv6)
    if "attach" in table:
        ctx.fail((*path, "attach"), "attach cables a host NIC to a device: one end of the "
                                    "link must be a device (a node with ssh = ... or "
                                    "labgrid = ...)")
    subnet4, subnet6 = _subnets(ctx, table, path, ipv6)
    link = replace(_link(ctx, index, ends, defaults, own), subnet4=subnet4, subnet6=subnet6)
    raw_addresses = table.get("addresses")
    if isinstance(raw_addresses, dict):
        given = dev.address_table(raw_addresses, (*path, "addresses"), ends, (), ipv6,
                                  ctx.fail)
        for x, y in _table_pairs(ctx, given, ends, (*path, "addresses")):
            if isinstance(x, IPv4Interface) and isinstance(y, IPv4Interface):
                link = replace(link, addr_a4=x, addr_b4=y)
            elif isinstance(x, IPv6Interface) and isinstance(y, IPv6Interface):
                link = replace(link, addr_a6=x, addr_b6=y)
    elif "addresses" in table:
        subnets: dict[int, Net | None] = {4: subnet4, 6: subnet6}
        for x, y in _addresses(ctx, table["addresses"], (*path, "addresses"), subnets, ipv6):
            if isinstance(x, IPv4Interface) and isinstance(y, IPv4Interface):
                link = replace(link, addr_a4=x, addr_b4=y)
            elif isinstance(x, IPv6Interface) and isinstance(y, IPv6Interface):
                link = replace(link, addr_a6=x, addr_b6=y)
    return link


def _table_pairs(ctx: _Ctx, given: dict[str, list[tuple[dev.Iface | dev.Addr, Path]]],
                 ends: tuple[str, str],
                 path: Path) -> list[tuple[Iface, Iface]]:
    """Pairs (side a, side b) per family from { a = ..., b = ... } between namespaces."""
    out: list[tuple[Iface, Iface]] = []
    mine = {n: {a.version: (a, w) for a, w in given.get(n, [])
                if isinstance(a, IPv4Interface | IPv6Interface)} for n in ends}
    for version in (4, 6):
        xa, xb = mine[ends[0]].get(version), mine[ends[1]].get(version)
        if xa is None and xb is None:
            continue
        if xa is None or xb is None:
            missing = ends[0] if xa is None else ends[1]
            ctx.fail(path, f"give {missing}'s IPv{version} address too, or neither")
        (x, _), (y, where_y) = xa, xb
        if x.network != y.network or x.ip == y.ip:
            ctx.fail(where_y, f"{y} must be a different address in the same subnet as {x}")
        out.append((x, y))
    return out


def _cable(ctx: _Ctx, table: dict[str, object], path: Path, link: Link,
           devices: Collection[str], ipv6: bool) -> Link:
    """A link with a device end: a cable hoplab neither builds nor shapes."""
    for key in _NOT_ON_CABLES:
        if key in table:
            ctx.fail((*path, key), f"'{key}' is not for a link to a device: hoplab builds "
                                   f"nothing on a cable; configure the device with setup "
                                   f"commands")
    if not (link.forward.is_plain() and link.reverse.is_plain()):
        ctx.fail(path, "a link to a device is a cable hoplab does not shape; shape it on the "
                       "device with a setup command (tc), or shape a namespace link")
    ends = (link.a, link.b)
    attached = dev.attach(table["attach"], (*path, "attach"), ends, ctx.fail) \
        if "attach" in table else ()
    for node, _nic in attached:
        if node in devices:
            ctx.fail((*path, "attach", node), f"{node} is a device: its NICs are its own; "
                                              f"attach names this machine's NIC for a "
                                              f"namespace end")
    for node in ends:
        if node not in devices and node not in dict(attached):
            other = link.b if node == link.a else link.a
            ctx.fail(path, f"{node} (a namespace) reaches device {other} only through a host "
                           f'NIC cabled to it: add attach = {{ {node} = "NIC" }}')
    raw = table.get("addresses", {})
    if not isinstance(raw, dict):
        ctx.fail((*path, "addresses"), "name each end on a link to a device: addresses = "
                                       f'{{ {ends[0]} = "...", {ends[1]} = "..." }}')
    given = dev.address_table(raw, (*path, "addresses"), ends, devices, ipv6, ctx.fail)
    return dev.device_link(replace(link, attach=attached), given, devices, path, ctx.fail)


def _subnets(ctx: _Ctx, table: dict[str, object], path: Path,
             ipv6: bool) -> tuple[IPv4Network | None, IPv6Network | None]:
    subnet4 = subnet6 = None
    if "subnet4" in table:
        subnet4 = ctx.conv((*path, "subnet4"), network(IPv4Network), table["subnet4"])
    if "subnet6" in table:
        if not ipv6:
            ctx.fail((*path, "subnet6"), "IPv6 is disabled in [addressing] (ipv6 = false)")
        subnet6 = ctx.conv((*path, "subnet6"), network(IPv6Network), table["subnet6"])
    return subnet4, subnet6


def _node(ctx: _Ctx, name: str, raw: object, path: Path) -> Node:
    ctx.conv(path, lambda v: names.node_name(parse_str(v)), name)
    table = ctx.table(raw, path, _NODE_KEYS)
    ssh, place = _reach(ctx, name, table, path)
    vm = _vm(ctx, table, path) if "vm" in table else None
    if vm is not None and (ssh is not None or place is not None):
        ctx.fail((*path, "vm"), "a node is a virtual machine hoplab boots (vm = ...) or a "
                                "device it reaches (ssh, labgrid), not both")
    forward = None
    if "forward" in table:
        forward = ctx.conv((*path, "forward"), parse_bool, table["forward"])
    sysctls: list[tuple[str, str]] = []
    for key, value in ctx.table(table.get("sysctls", {}), (*path, "sysctls"), None).items():
        where = (*path, "sysctls", key)
        if not _SYSCTL.fullmatch(key):
            ctx.fail(where, "not a sysctl name; write it dotted, e.g. net.ipv4.ip_forward")
        if re.split(r"[./]", key, maxsplit=1)[0] != "net":
            # Only net.* belongs to the node's namespace; kernel.*, vm.*, fs.* are the
            # host's, and a lab must not rewrite the machine it runs on.
            ctx.fail(where, "only net.* sysctls can be set: they belong to the node's "
                            "namespace, other keys would change the whole host")
        if isinstance(value, bool):  # sysctl files want 1/0, not true/false
            sysctls.append((key, "1" if value else "0"))
        elif isinstance(value, int | str):
            sysctls.append((key, str(value)))
        else:
            ctx.fail(where, f"a sysctl value is a string, integer or boolean, got {kind(value)}")
    iface_offloads: tuple[tuple[str, str, bool], ...] = ()
    if ssh is not None or place is not None:
        offloads, iface_offloads = dev.device_offloads(
            ctx.table(table.get("offloads", {}), (*path, "offloads"), None),
            (*path, "offloads"), ctx.fail)
    else:
        offloads = tuple(
            (key, ctx.conv((*path, "offloads", key), parse_bool, value))
            for key, value in ctx.table(table.get("offloads", {}), (*path, "offloads"),
                                        OFFLOADS).items()
        )
    nat = None
    if "nat" in table:
        nat_table = ctx.table(table["nat"], (*path, "nat"), ("out",))
        if "out" not in nat_table:
            ctx.fail((*path, "nat"), 'missing required key "out" (an interface or neighbour node)')
        nat = Nat(out=ctx.conv((*path, "nat", "out"), parse_str, nat_table["out"]))
    commands = {
        key: tuple(ctx.conv((*path, key, k), parse_command, item)
                   for k, item in enumerate(ctx.array(table.get(key, []), (*path, key))))
        for key in ("setup", "teardown")
    }
    return Node(name=name, forward=forward, sysctls=tuple(sysctls), offloads=offloads, nat=nat,
                setup=commands["setup"], teardown=commands["teardown"], ssh=ssh,
                iface_offloads=iface_offloads, labgrid=place, vm=vm)


def _vm(ctx: _Ctx, table: dict[str, object], path: Path) -> VmSpec:
    where = (*path, "vm")
    raw = ctx.table(table["vm"], where, vm_spec.KEYS)
    if ("kernel" in raw) == ("image" in raw):
        ctx.fail(where, 'a VM boots a kernel ("debian:RELEASE" or a bzImage: kernel = ...) '
                        "or a firmware's disk image (image = ...): one of the two"
                 if "kernel" in raw else
                 'missing required key "kernel" ("debian:RELEASE" or a bzImage) or "image" '
                 "(a firmware's disk image)")
    base = os.path.dirname(os.path.abspath(ctx.source)) if ctx.source.endswith(".toml") \
        else os.getcwd()
    if "image" in raw:
        return _vm_image(ctx, raw, where, base)
    for key in vm_spec.IMAGE_KEYS:
        if key in raw:
            ctx.fail((*where, key), f"{key} is a firmware image's (image = ...); a kernel "
                                    "hoplab boots is reached with keys of its own")
    spec = VmSpec(kernel=ctx.conv((*where, "kernel"), lambda v: vm_spec.kernel(v, base),
                                  raw["kernel"]))
    spec = _vm_keys(ctx, raw, where, spec,
                    (("modules", "modules", lambda v: vm_spec.path(v, base)),))
    return _vm_size(ctx, raw, where, spec)


def _vm_size(ctx: _Ctx, raw: dict[str, object], where: Path, spec: VmSpec) -> VmSpec:
    return _vm_keys(ctx, raw, where, spec, (("vcpus", "vcpus", vm_spec.vcpus),
                                            ("memory", "memory_mib", vm_spec.memory),
                                            ("cpu", "cpu_pct", vm_spec.cpu)))


def _vm_keys(ctx: _Ctx, raw: dict[str, object], where: Path, spec: VmSpec,
             keys: tuple[tuple[str, str, Callable[[object], object]], ...]) -> VmSpec:
    """`spec` with each (key, field, converter) the table has, converted (an error names
    the key)."""
    changes: dict[str, Any] = {field_name: ctx.conv((*where, key), conv, raw[key])
                               for key, field_name, conv in keys if key in raw}
    return replace(spec, **changes)


def _vm_image(ctx: _Ctx, raw: dict[str, object], where: Path, base: str) -> VmSpec:
    """A firmware's own disk image, and how its SSH server is reached."""
    for key in vm_spec.KERNEL_KEYS:
        if key in raw:
            ctx.fail((*where, key), f"{key} goes with a kernel; a firmware image has its "
                                    "own")
    spec = VmSpec(image=ctx.conv((*where, "image"), lambda v: vm_spec.path(v, base),
                                 raw["image"]))
    spec = _vm_keys(ctx, raw, where, spec, (
        ("user", "user", vm_spec.user),
        ("identity", "identity", lambda v: vm_spec.path(v, base)),
        ("host_key", "host_key", vm_spec.host_key),
        ("management", "management", vm_spec.management)))
    return _vm_size(ctx, raw, where, spec)


def _reach(ctx: _Ctx, name: str, table: dict[str, object], path: Path
           ) -> tuple[SshTarget | None, LabgridPlace | None]:
    """How a device is reached: `ssh` (with `ssh_options`), or a labgrid place (with
    the coordinator and the SSH options the place does not say); neither: a namespace."""
    ssh = place = None
    if "labgrid" in table:
        if "ssh" in table:
            ctx.fail((*path, "ssh"), "a device is reached by ssh = \"user@host\" or by a "
                                     "labgrid place, not both")
        options = ctx.table(table.get("ssh_options", {}), (*path, "ssh_options"), None)
        if "port" in options:
            ctx.fail((*path, "ssh_options", "port"), "the labgrid place's NetworkService "
                                                     "gives the port (and the host and user)")
        ctx.table(options, (*path, "ssh_options"), dev.LABGRID_SSH_OPTION_KEYS)
        coordinator = None
        if "labgrid_coordinator" in table:
            coordinator = ctx.conv((*path, "labgrid_coordinator"), dev.coordinator,
                                   table["labgrid_coordinator"])
        place = dev.labgrid_place(ctx.conv((*path, "labgrid"), dev.place, table["labgrid"]),
                                  coordinator, options, (*path, "ssh_options"), ctx.fail)
    elif "labgrid_coordinator" in table:
        ctx.fail((*path, "labgrid_coordinator"), 'labgrid_coordinator needs labgrid = '
                                                 '"PLACE" beside it')
    elif "ssh" in table:
        destination = ctx.conv((*path, "ssh"), dev.destination, table["ssh"])
        options = ctx.table(table.get("ssh_options", {}), (*path, "ssh_options"),
                            dev.SSH_OPTION_KEYS)
        ssh = dev.ssh_target(destination, options, (*path, "ssh_options"), ctx.fail)
    elif "ssh_options" in table:
        ctx.fail((*path, "ssh_options"), 'ssh_options needs ssh = "user@host" beside it')
    if ssh is not None or place is not None:
        key = "ssh" if ssh is not None else "labgrid"
        for bad, instead in _NOT_ON_DEVICES.items():
            if bad in table:
                ctx.fail((*path, bad), f"'{bad}' is not for a device (nodes.{name}.{key}): "
                                       f"hoplab builds nothing on it; {instead}")
    return ssh, place


def _check_nat(ctx: _Ctx, nodes: Sequence[Node], links: Sequence[Link], _generated: int
               ) -> None:
    names = {n.name for n in nodes}
    for node in nodes:
        if node.nat is None:
            continue
        out, where = node.nat.out, ("nodes", node.name, "nat", "out")
        neighbours = {k.b if k.a == node.name else k.a for k in links if node.name in (k.a, k.b)}
        if out in names and out not in neighbours:
            ctx.fail(where, f"node '{out}' is not a neighbour of '{node.name}'")
        if out not in names and not _IFNAME.fullmatch(out):
            ctx.fail(where, f"'{out}' is neither a node nor a valid interface name")


def _check_overlaps(ctx: _Ctx, _nodes: Sequence[Node], links: Sequence[Link], generated: int
                    ) -> None:
    """Two links on one subnet would put one address on two nodes."""
    seen: list[tuple[Net, int]] = []
    for link in links[generated:]:
        for key, net in (("subnet4", link.subnet4 or (link.addr_a4 and link.addr_a4.network)),
                         ("subnet6", link.subnet6 or (link.addr_a6 and link.addr_a6.network))):
            if not net:
                continue
            for other, index in seen:
                if other.version == net.version and other.overlaps(net):
                    given = key if getattr(link, key) is not None else "addresses"
                    ctx.fail(("links", link.index - generated, given),
                             f"{net} overlaps {other} of links[{index}]")
            seen.append((net, link.index - generated))


def _check_nics(ctx: _Ctx, _nodes: Sequence[Node], links: Sequence[Link], generated: int
                ) -> None:
    """One host NIC is cabled to one device end."""
    seen: dict[str, int] = {}
    for link in links[generated:]:
        for node, nic in link.attach:
            k = link.index - generated
            if nic in seen:
                ctx.fail(("links", k, "attach", node), f"{nic} is already attached by "
                                                       f"links[{seen[nic]}]")
            seen[nic] = k


def _generate(ctx: _Ctx, raw: object) -> gen.Topology:
    table = ctx.table(raw, ("generate",), gen.GENERATORS)
    if isinstance(table.get("mesh"), dict):
        ctx.table(table["mesh"], ("generate", "mesh"), gen.MESH_KEYS)
    try:
        return gen.from_table(table)
    except gen.GenerateError as e:
        ctx.fail(("generate", *e.where), str(e))


def _addressing(ctx: _Ctx, raw: object) -> Addressing:
    path: Path = ("addressing",)
    table = ctx.table(raw, path, _ADDRESSING_KEYS)
    default = Addressing()

    def pool(key: str, cls: type[N], fallback: N) -> N:
        return ctx.conv((*path, key), network(cls), table[key]) if key in table else fallback

    got = replace(
        default,
        pool4=pool("pool4", IPv4Network, default.pool4),
        pool6=pool("pool6", IPv6Network, default.pool6),
        tunnel_pool4=pool("tunnel_pool4", IPv4Network, default.tunnel_pool4),
        tunnel_pool6=pool("tunnel_pool6", IPv6Network, default.tunnel_pool6),
    )
    if "ipv6" in table:
        got = replace(got, ipv6=ctx.conv((*path, "ipv6"), parse_bool, table["ipv6"]))
    for plain, tunnel in ((got.pool4, got.tunnel_pool4), (got.pool6, got.tunnel_pool6)):
        if plain.overlaps(tunnel):
            key = "tunnel_pool" if f"tunnel_pool{plain.version}" in table else "pool"
            ctx.fail((*path, f"{key}{plain.version}"),
                     f"{plain} and {tunnel} overlap; link and tunnel addresses must not collide")
    return got


def _tunnels(ctx: _Ctx, raw: object, nodes: Collection[str], links: Sequence[Link],
             ipv6: bool) -> tuple[Tunnel, ...]:
    adjacency: dict[str, set[str]] = {n: set() for n in nodes}
    for link in links:
        adjacency[link.a].add(link.b)
        adjacency[link.b].add(link.a)
    tunnels: list[Tunnel] = []
    for i, item in enumerate(ctx.array(raw, ("tunnels",))):
        path: Path = ("tunnels", i)
        table = ctx.table(item, path, _TUNNEL_KEYS)
        name = ctx.conv((*path, "name"), parse_str, table.get("name", f"wg{i}"))
        if not _TUNNEL_NAME.fullmatch(name):
            ctx.fail((*path, "name"), f"'{name}' is not 1 to 8 lowercase letters or digits")
        if any(t.name == name for t in tunnels):
            ctx.fail((*path, "name"), f"a tunnel named '{name}' is already defined")
        ctx.conv((*path, "type"), choice(("wireguard",)), table.get("type", "wireguard"))
        if "between" not in table:
            ctx.fail(path, 'missing required key "between" (the two tunnel ends)')
        a, b = ctx.pair(table["between"], (*path, "between"), nodes)
        reached, todo = {a}, [a]
        while todo:
            for nxt in adjacency[todo.pop()] - reached:
                reached.add(nxt)
                todo.append(nxt)
        if b not in reached:
            ctx.fail((*path, "between"), f"no path of links joins '{a}' and '{b}'")
        subnet4, subnet6 = _subnets(ctx, table, path, ipv6)
        tunnels.append(Tunnel(name=name, a=a, b=b, subnet4=subnet4, subnet6=subnet6))
    return tuple(tunnels)


def _lab_name(ctx: _Ctx, raw: object, override: str | None) -> str:
    def parse(value: object) -> str:
        return names.lab_name(parse_str(value))

    from_file = ctx.conv(("name",), parse, raw) if raw is not None else None
    if override is not None:
        try:
            return parse(override)
        except ValueError as e:
            raise SpecError(f"{e} (given instead of the file's name)", file=ctx.source,
                            key="name") from None
    if from_file is None:
        ctx.fail(("name",), 'missing required key: add e.g. name = "mylab" at the top')
    return from_file


def _nodes(ctx: _Ctx, top: dict[str, object], topo: gen.Topology) -> tuple[Node, ...]:
    """Generated nodes in their generated order, then the others; [nodes.X] of a
    generated node only sets its options."""
    none: dict[str, object] = {}
    raw = ctx.attempt(none, ctx.table, top.get("nodes", {}), ("nodes",), None)
    explicit = {n: ctx.attempt(Node(name=n), _node, ctx, n, v, ("nodes", n))
                for n, v in raw.items()}
    generated = set(topo.nodes)
    order = list(topo.nodes) + [n for n in explicit if n not in generated]
    nodes = tuple(explicit.get(n, Node(name=n)) for n in order)
    if not nodes:
        ctx.note(("nodes",), "a lab needs at least one node: add [nodes.NAME] or [generate]")
    return nodes


def _links(ctx: _Ctx, top: dict[str, object], topo: gen.Topology, nodes: Sequence[Node],
           devices: Collection[str], ipv6: bool) -> list[Link]:
    where: Path = ("link_defaults",)
    none: dict[str, object] = {}
    table = ctx.attempt(none, ctx.table, top.get("link_defaults", {}), where,
                        _LINK_OPTION_KEYS)
    defaults = ctx.attempt(_Options(), _options, ctx, table, where)
    order = [n.name for n in nodes]
    # Generated links have only the defaults' options: one is built and checked (its
    # ends name it in a message), the others are copies with their own ends.
    first = ctx.attempt(None, _link, ctx, 0, topo.links[0], defaults, _Options()) \
        if topo.links else None
    links: list[Link | None] = [None if first is None else replace(first, index=i, a=a, b=b)
                                for i, (a, b) in enumerate(topo.links)]
    nothing: list[object] = []
    for i, raw in enumerate(ctx.attempt(nothing, ctx.array, top.get("links", []),
                                        ("links",))):
        links.append(ctx.attempt(None, _explicit_link, ctx, raw, ("links", i), len(links),
                                 order, defaults, ipv6, devices))
    # In a check a link with a problem is left out; in a load there is none.
    return [lk for lk in links if lk is not None]


def _build(ctx: _Ctx, data: dict[str, object], name: str | None) -> Lab:
    top = ctx.table(data, (), _TOP_KEYS)
    lab_name = ctx.attempt("lab", _lab_name, ctx, top.get("name"), name)
    addressing = ctx.attempt(Addressing(), _addressing, ctx, top.get("addressing", {}))
    topo = gen.Topology((), ())
    if "generate" in top:
        topo = ctx.attempt(topo, _generate, ctx, top["generate"])
    nodes = _nodes(ctx, top, topo)
    # Nodes whose links end on their own interfaces, read from them at lab up.
    devices = {n.name for n in nodes if n.node_kind.links == "own"}
    for name in sorted(devices & set(topo.nodes)):
        ctx.note(("nodes", name, "ssh"), f"'{name}' is a generated node; a device is "
                                         f"declared with its links in [[links]]")
    links = _links(ctx, top, topo, nodes, devices, addressing.ipv6)
    for check in (_check_nat, _check_overlaps, _check_nics):
        # Each finds at most its first problem: they see the whole lab.
        ctx.attempt(None, check, ctx, nodes, links, len(topo.links))
    no_tunnels: tuple[Tunnel, ...] = ()
    tunnels = ctx.attempt(no_tunnels, _tunnels, ctx, top.get("tunnels", []),
                          [n.name for n in nodes], links, addressing.ipv6)
    for k, t in enumerate(tunnels):
        for end in (t.a, t.b):
            if end in devices:
                ctx.note(("tunnels", k, "between"), f"{end} is a device: hoplab builds no "
                                                    "tunnel on it; use setup commands")
    accept = False
    if "accept_new_host_keys" in top:
        accept = ctx.attempt(False, ctx.conv, ("accept_new_host_keys",), parse_bool,
                             top["accept_new_host_keys"])
    return Lab(name=lab_name, nodes=nodes, links=tuple(links), tunnels=tunnels,
               addressing=addressing, source=ctx.source, accept_new_host_keys=accept)


def parse_toml(text: str, source: str) -> dict[str, object]:
    """The TOML table of a lab file; a syntax error is a SpecError at its line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message, line = split_syntax_error(str(e), text)
        dup = _DUP_NODE.match(message)
        if dup is not None:
            raise SpecError(f"duplicate node '{dup.group(1)}': [nodes.{dup.group(1)}] "
                            f"is already declared above", file=source,
                            key=key_name(("nodes", dup.group(1))), line=line) from None
        raise SpecError(f"TOML syntax error: {message}", file=source, line=line) from None


def load_lab_text(text: str, source: str, name: str | None = None) -> Lab:
    """Parse and validate lab TOML `text`; `source` names it in messages and Lab.source."""
    return _build(_Ctx(text, source), parse_toml(text, source), name)


def load_lab_data(data: dict[str, object], text: str, source: str,
                  name: str | None = None, problems: list[SpecError] | None = None) -> Lab:
    """Validate an already parsed (and possibly modified) lab table. `text` is the file it
    came from, used to find lines for messages; keys added later have the line of their
    nearest enclosing table. With `problems` (a check), every part's first problem is
    added there and the Lab returned is what the parts without one make."""
    return _build(_Ctx(text, source, problems), data, name)


def check_lab_data(data: dict[str, object], text: str, source: str
                   ) -> tuple[Lab | None, list[SpecError]]:
    """Every problem of a lab table, one per part that stands on its own (hoplab check);
    the Lab when there is none."""
    problems: list[SpecError] = []
    try:
        lab = load_lab_data(data, text, source, problems=problems)
    except SpecError as e:  # a problem the rest of the file cannot be read past
        problems.append(e)
    return (None if problems else lab), problems


def load_lab(path: str | FsPath, name: str | None = None) -> Lab:
    """Read and validate the lab file at `path`; `name` replaces the file's name."""
    try:
        text = user_files.read_text(FsPath(path))
    except (OSError, ValueError) as e:  # FileRefused, UnicodeDecodeError
        raise SpecError(f"cannot read the lab file: {e}", file=str(path)) from None
    return load_lab_text(text, str(path), name)


# The experiment loader reports its errors the same way.
SpecContext = _Ctx
