"""One flow of a test: its server and its client command, as its kind (hoplab.kinds)
builds them. iperf3 serves one test at a time, so every bulk flow gets its own one-off
server on its own port; every probe flow its own irtt server."""

from __future__ import annotations

from pathlib import Path

from hoplab.kinds import flow_tool
from hoplab.kinds.flow import Server
from hoplab.lab.plan import Plan
from hoplab.spec.experiment import Flow


def server_for(flow: Flow, index: int, plan: Plan) -> Server | None:
    return flow_tool(flow.kind).server(flow, index, plan)


def client_argv(flow: Flow, index: int, plan: Plan) -> list[str]:
    return flow_tool(flow.kind).client(flow, index, plan)


def warm_argv(flow: Flow, index: int, plan: Plan, go: Path) -> list[str] | None:
    """The client's argv when its kind starts it before the clock (FlowTool.warm), to
    begin when `go` holds the clock's time; None for a client started at its offset."""
    warm = flow_tool(flow.kind).warm
    return None if warm is None else warm(flow, index, plan, go)
