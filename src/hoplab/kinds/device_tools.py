"""The tools a lab's tests will run on each device, checked there before lab up
(hoplab.lab.devices.tools.check_tools)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hoplab.kind_registry import flow_tool
from hoplab.spec.model import Lab


def test_tools(lab: Lab, tests: Iterable[Any]) -> tuple[dict[str, set[str]], dict[str, str]]:
    """What the tests will run on each device (a flow's client on its source, its server
    on its destination; ping needs no server), and which test needs each, for
    check_tools' message."""
    devices = {n.name for n in lab.devices()}
    needs: dict[str, set[str]] = {}
    why: dict[str, str] = {}
    for test in tests:
        for flow in test.flows:
            ft = flow_tool(flow.kind)
            ends = [(flow.src, ft.tool)]
            if ft.tool != "ping":
                ends.append((flow.dst, ft.server_tool or ft.tool))
            for node, tool in ends:
                if node in devices:
                    needs.setdefault(node, set()).add(tool)
                    why.setdefault(f"{node}:{tool}", f"test {test.name!r}")
    return needs, why
