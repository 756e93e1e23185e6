"""What a run records about where it ran: host, kernel, tools, and each node's settings.

Collected once per experiment (host and tools) and once per lab build (sysctls,
offloads and qdiscs of every node), since those do not change between the
runs on one lab.
"""

from __future__ import annotations

import json
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from hoplab import __version__
from hoplab.lab import netns
from hoplab.lab.caps import Capabilities
from hoplab.lab.plan import Plan

SYSCTLS = (
    "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
    "net.core.rmem_max", "net.core.wmem_max", "net.core.default_qdisc",
    "net.ipv4.tcp_ecn", "net.ipv4.ip_forward", "net.ipv4.tcp_mtu_probing",
)
_OFFLOADS = ("generic-receive-offload", "generic-segmentation-offload",
             "tcp-segmentation-offload", "scatter-gather", "tx-checksumming",
             "rx-checksumming")


def host_metadata(caps: Capabilities) -> dict[str, Any]:
    uname = platform.uname()
    cpus = Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() \
        else ""
    model = next((line.split(":", 1)[1].strip() for line in cpus.splitlines()
                  if line.startswith("model name")), uname.machine)
    return {
        "hoplab_version": __version__,
        "host": socket.gethostname(),
        "kernel": uname.release,
        "kernel_build": uname.version,
        "machine": uname.machine,
        "cpu_model": model,
        "cpus": cpus.count("processor\t:"),
        "python": platform.python_version(),
        "tools": {k: v for k, v in caps.tools.items()
                  if k in ("iperf3", "irtt", "ping", "fping", "tc", "ip", "wireguard-go",
                           "perf", "nft")},
    }


def _read_sysctls() -> dict[str, str]:
    out = {}
    for key in SYSCTLS:
        path = Path("/proc/sys") / key.replace(".", "/")
        try:
            out[key] = " ".join(path.read_text().split())
        except OSError:
            continue
    return out


def _offloads(ifname: str) -> dict[str, str]:
    res = subprocess.run(["ethtool", "-k", ifname], capture_output=True, text=True,
                         check=False, timeout=10)
    out = {}
    for line in res.stdout.splitlines():
        key, _, value = line.strip().partition(":")
        if key in _OFFLOADS:
            out[key] = value.split()[0] if value.split() else ""
    return out


def _qdiscs() -> list[dict[str, Any]]:
    res = subprocess.run(["tc", "-j", "qdisc", "show"], capture_output=True, text=True,
                         check=False, timeout=10)
    try:
        data = json.loads(res.stdout or "[]")
    except json.JSONDecodeError:
        return []
    return [q for q in data if isinstance(q, dict) and q.get("dev") != "lo"]


def node_settings(plan: Plan) -> dict[str, Any]:
    """Sysctls, offloads and qdiscs of every node, read inside each namespace."""
    by_ns = {n.netns: n for n in plan.nodes}

    def read(ns: str) -> dict[str, Any]:
        node = by_ns[ns]
        return {"sysctls": _read_sysctls(),
                "offloads": {i.name: _offloads(i.name) for i in node.ifaces},
                "qdiscs": _qdiscs()}

    settings = netns.in_each(list(by_ns), read)
    return {by_ns[ns].name: s for ns, s in zip(by_ns, settings, strict=True)}
