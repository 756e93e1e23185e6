"""What a run records about where it ran: host, kernel, tools, and each node's settings.

Collected once per experiment (host and tools) and once per lab build (sysctls,
offloads, qdiscs and facts of every node, through each node's executor), since
those do not change between the runs on one lab.
"""

from __future__ import annotations

import json
import platform
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hoplab import __version__
from hoplab.lab.caps import Capabilities
from hoplab.lab.plan import Plan
from hoplab.nodes.executor import SYSCTLS, Executor

_OFFLOADS = ("generic-receive-offload", "generic-segmentation-offload",
             "tcp-segmentation-offload", "scatter-gather", "tx-checksumming",
             "rx-checksumming")


def host_metadata(caps: Capabilities) -> dict[str, Any]:
    uname = platform.uname()
    cpus = (Path("/proc/cpuinfo").read_text(errors="replace")
            if Path("/proc/cpuinfo").exists() else "")
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
                           "perf", "nft", "nginx", "chromium")},
    }


def _read_sysctls(node: Executor) -> dict[str, str]:
    out = {}
    for key in SYSCTLS:
        raw = node.read_file("/proc/sys/" + key.replace(".", "/"))
        if raw is not None:
            out[key] = " ".join(raw.decode(errors="replace").split())
    return out


def _offloads(node: Executor, ifname: str) -> dict[str, str]:
    res = node.run(["ethtool", "-k", ifname], timeout=10)
    out = {}
    for line in res.stdout.splitlines():
        key, _, value = line.strip().partition(":")
        if key in _OFFLOADS:
            out[key] = value.split()[0] if value.split() else ""
    return out


def _qdiscs(node: Executor) -> list[dict[str, Any]]:
    res = node.run(["tc", "-j", "qdisc", "show"], timeout=10)
    try:
        data = json.loads(res.stdout or "[]")
    except json.JSONDecodeError:
        return []
    return [q for q in data if isinstance(q, dict) and q.get("dev") != "lo"]


def _settings(node: Executor, ifaces: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"sysctls": _read_sysctls(node),
                           "offloads": {i: _offloads(node, i) for i in ifaces},
                           "qdiscs": _qdiscs(node)}
    facts = node.facts()
    out.update(facts.values)
    if facts.missing:
        out["missing"] = dict(facts.missing)
    return out


def node_settings(plan: Plan, nodes: Mapping[str, Executor]) -> dict[str, Any]:
    """Sysctls, offloads, qdiscs and facts of every node, read through its executor, a
    few nodes at a time."""
    from concurrent.futures import ThreadPoolExecutor

    names = [n.name for n in plan.nodes]

    def read(name: str) -> dict[str, Any]:
        return _settings(nodes[name], [i.name for i in plan.node(name).ifaces])

    if len(names) <= 1:
        return {n: read(n) for n in names}
    # Waiting on forks and devices, not on this machine's CPUs.
    with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
        return dict(zip(names, pool.map(read, names), strict=True))
