"""What hoplab knows about each external tool it runs, in one entry per tool: the
executable, the Debian and OpenWrt packages that bring it, and how to ask its version.

Everything that names a package or asks a version reads it here: this machine's probe
(hoplab.lab.caps, `hoplab doctor`), a device's tool check (hoplab.lab.devices.tools),
a device's facts (hoplab.nodes.ssh_facts) and each test kind's tool
(hoplab.kind_registry.FlowTool.package). A new tool is one entry below. Which tools
each of them asks about is its own choice (caps.TOOL_NAMES, ssh_facts.TOOLS).

A leaf of the core layer: it imports nothing of hoplab, so every layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tool:
    name: str                               # the executable
    debian: str                             # the Debian (and Ubuntu) package that has it
    openwrt: str                            # what `opkg install` needs for it on OpenWrt
    version: tuple[str, ...] | None = None  # argv after the tool printing its version


def _table(*tools: Tool) -> dict[str, Tool]:
    return {t.name: t for t in tools}


TOOLS: dict[str, Tool] = _table(
    Tool("ip", "iproute2", "ip-full (or BusyBox's ip)", ("-V",)),
    Tool("tc", "iproute2", "tc-full (or tc-tiny)", ("-V",)),
    Tool("iperf3", "iperf3", "iperf3", ("--version",)),
    Tool("irtt", "irtt", "irtt", ("version",)),
    Tool("fping", "fping", "fping", ("--version",)),
    Tool("ping", "iputils-ping", "iputils-ping", ("-V",)),
    Tool("nft", "nftables", "nftables", ("--version",)),
    Tool("iptables", "iptables", "iptables-nft"),
    Tool("ethtool", "ethtool", "ethtool", ("--version",)),
    Tool("wg", "wireguard-tools", "wireguard-tools", ("--version",)),
    Tool("wireguard-go", "wireguard-go", "wireguard-tools with kmod-wireguard",
         ("--version",)),
    Tool("perf", "linux-perf",
         "perf, libdw, libelf, libunwind, objdump (a kernel with KERNEL_PERF_EVENTS)",
         ("--version",)),
    Tool("nginx", "nginx", "nginx-ssl (or nginx-full)", ("-v",)),
    Tool("chromium", "chromium", "chromium", ("--version",)),
    Tool("python3", "python3", "python3", ("--version",)),
    Tool("tee", "coreutils", "busybox"),
)


def debian(tool: str) -> str:
    """The Debian package of a tool; a tool hoplab does not know is its own package."""
    known = TOOLS.get(tool)
    return known.debian if known else tool


def openwrt(tool: str) -> str:
    """What `opkg install` needs for a tool on OpenWrt; an unknown tool is its own."""
    known = TOOLS.get(tool)
    return known.openwrt if known else tool


def version_args(tool: str) -> tuple[str, ...]:
    """The argv after a known tool that prints its version (KeyError: none is known)."""
    args = TOOLS[tool].version
    if args is None:
        raise KeyError(tool)
    return args


def need(tool: str) -> tuple[str, str]:
    """(tool, its Debian package): an entry of FlowTool.needs."""
    return tool, debian(tool)
