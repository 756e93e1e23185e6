"""A finished flow's output -> its outcome (series and per-flow metrics on the run's
clock), parsed by its kind's collector (hoplab.kinds)."""

from __future__ import annotations

from hoplab.errors import HoplabError
from hoplab.kinds import flow_tool
from hoplab.kinds.flow import Outcome
from hoplab.record import RawOutput
from hoplab.run.procs import Proc
from hoplab.spec.experiment import Flow


def collect(flow: Flow, proc: Proc, t0: float, window: tuple[float, float]) -> Outcome:
    """The flow's outcome from its client's output, parsed as its kind (hoplab.kinds) says."""
    tool = flow_tool(flow.kind)
    out = Outcome(flow)
    data = proc.output()
    # Named by the flow's tool, not its argv[0] (a web flow's is hoplab's Python).
    out.raw.append(RawOutput(f"{flow.name} {tool.tool}", data, tool.media_type))
    stderr = proc.errors()
    if stderr:
        out.raw.append(RawOutput(f"{flow.name} {tool.tool} stderr", stderr.encode()))
    try:
        tool.collect(out, data.decode("utf-8", errors="replace"), t0, proc.times(), window)
    except HoplabError as e:
        out.error = f"flow {flow.name}: {e}" + (f" ({stderr})" if stderr else "")
    return out
