"""The tools a device must have, checked on it before anything is touched: a missing
one is refused (exit 2) with the packages that bring it (hoplab.tool_table)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from hoplab.lab.devices.errors import spec_error
from hoplab.lab.plan import Plan
from hoplab.nodes.executor import Executor
from hoplab.spec.model import Lab
from hoplab.tool_table import debian, openwrt, version_args

# Tools whose BusyBox applet is not enough: how to tell, and what the applet lacks.
_KIND_OF_TOOL = {
    "ping": (["ping", *version_args("ping")], "iputils",
             "per-reply timestamps (-D; BusyBox's ping)"),
}


def install_hint(tool: str) -> str:
    return (f"opkg install {openwrt(tool)} (OpenWrt) or apt-get install {debian(tool)} "
            f"(Debian, Ubuntu)")


def tools_needed(lab: Lab, plan: Plan | None = None) -> dict[str, set[str]]:
    """The tools the lab file's device settings need, per device."""
    out: dict[str, set[str]] = {}
    for node in lab.devices():
        need = out.setdefault(node.name, {"ip"})
        if node.offloads or node.iface_offloads:
            need.add("ethtool")
        if node.sysctls:
            need.add("tee")
        for argv in (*node.setup, *node.teardown):
            need.add(argv[0])
    return out


def check_tools(lab: Lab, executors: Mapping[str, Executor],
                needs: Mapping[str, Collection[str]], why: Mapping[str, str] | None = None
                ) -> None:
    """Refuse (exit 2) when a device lacks a tool: names it and its packages."""
    for node, tools in needs.items():
        ex = executors.get(node)
        if ex is None or not tools:
            continue
        found = ex.which(sorted(tools))
        missing = sorted(t for t, path in found.items() if path is None)
        for tool, (argv, mark, lacks) in _KIND_OF_TOOL.items():
            if tool in tools and found.get(tool) is not None and not missing:
                said = ex.run(argv, timeout=30)
                if mark not in said.stdout + said.stderr:
                    reason = (why or {}).get(f"{node}:{tool}", "this lab")
                    raise spec_error(lab, ("nodes", node, lab.node(node).reached_by),
                                     f"device {node} has a {tool} without {lacks}, which "
                                     f"{reason} needs: {install_hint(tool)}")
        if missing:
            tool = missing[0]
            reason = (why or {}).get(f"{node}:{tool}", "this lab")
            raise spec_error(lab, ("nodes", node, lab.node(node).reached_by),
                             f"device {node} lacks {tool}, which {reason} needs: "
                             f"{install_hint(tool)}")
