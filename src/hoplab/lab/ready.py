"""A lab that is up, made ready for a variant's runs: the variant's setup commands, each
on its node, then what every node's settings are (sysctls, offloads, qdiscs, facts).

Both go through the nodes' executors the runner holds and return what they found; the
settings are read once per lab build, since they do not change between the runs on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hoplab.errors import HoplabError
from hoplab.lab.plan import Plan
from hoplab.nodes.executor import SYSCTLS, Executor
from hoplab.spec.experiment import Variant

_PLACEHOLDER = re.compile(r"\{(iface|addr|addr6):([A-Za-z0-9_-]+)\}")


def expand(arg: str, node: str, plan: Plan) -> str:
    """{iface:PEER}: node's interface towards PEER; {addr:NODE} / {addr6:NODE}: NODE's
    address, so a setup script needs no knowledge of the planner's choices."""
    def sub(m: re.Match[str]) -> str:
        what, name = m.group(1), m.group(2)
        try:
            if what == "iface":
                return next(i.name for i in plan.node(node).ifaces if i.peer == name)
            addr = plan.node(name).primary4 if what == "addr" else plan.node(name).primary6
        except (KeyError, StopIteration):
            addr = None
        if addr is None:
            raise HoplabError(f"setup.{node}: {m.group(0)} does not name a "
                              f"{'neighbour' if what == 'iface' else 'node with an address'}")
        return str(addr)
    return _PLACEHOLDER.sub(sub, arg)


# A variant's setup command that runs longer than this is stopped and its run fails.
SETUP_TIMEOUT_S = 120.0


def run_setup(variant: Variant, plan: Plan, nodes: Mapping[str, Executor], cwd: Path) -> None:
    """A variant's setup commands, each on its node, in the experiment file's directory."""
    for node, raw_argv in variant.setup:
        argv = [expand(a, node, plan) for a in raw_argv]
        try:
            proc = nodes[node].run(argv, cwd=str(cwd), timeout=SETUP_TIMEOUT_S)
        except TimeoutError:
            raise HoplabError(f"setup.{node}: {' '.join(argv)} did not finish in "
                              f"{SETUP_TIMEOUT_S:g} s; stopped") from None
        # 127 and 126 are how every kind of node (and a shell) says it could not run it.
        said = " ".join(proc.stderr.split())
        if proc.returncode == 127 and said.endswith("command not found"):
            raise HoplabError(f"setup.{node}: command not found: {argv[0]}")
        if proc.returncode == 126 and said:
            raise HoplabError(f"setup.{node}: cannot run {argv[0]}: "
                              f"{said.rsplit(': ', 1)[-1]}")
        if proc.returncode != 0:
            msg = " ".join((proc.stderr or proc.stdout).split())[:300]
            raise HoplabError(f"setup.{node}: {' '.join(argv)} exited {proc.returncode}: "
                              f"{msg}")


_OFFLOADS = ("generic-receive-offload", "generic-segmentation-offload",
             "tcp-segmentation-offload", "scatter-gather", "tx-checksumming",
             "rx-checksumming")


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
    """A node with a kernel of its own (a device, a VM) tells its sysctls, offloads and
    qdiscs in its facts, one command; only what they lack is read one by one (each a
    command of its own: over SSH to a VM under TCG, 0.3-0.8 s apiece)."""
    facts = node.facts()
    out: dict[str, Any] = {}
    if "sysctls" not in facts.values:
        out["sysctls"] = _read_sysctls(node)
    if "offloads" not in facts.values:
        out["offloads"] = {i: _offloads(node, i) for i in ifaces}
    if "qdiscs" not in facts.values:
        out["qdiscs"] = _qdiscs(node)
    out.update(facts.values)
    if facts.missing:
        out["missing"] = dict(facts.missing)
    return out


def node_settings(plan: Plan, nodes: Mapping[str, Executor]) -> dict[str, Any]:
    """Sysctls, offloads, qdiscs and facts of every node, read through its executor, a
    few nodes at a time."""
    names = [n.name for n in plan.nodes]

    def read(name: str) -> dict[str, Any]:
        return _settings(nodes[name], [i.name for i in plan.node(name).ifaces])

    if len(names) <= 1:
        return {n: read(n) for n in names}
    # Waiting on forks and devices, not on this machine's CPUs.
    with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
        return dict(zip(names, pool.map(read, names), strict=True))
