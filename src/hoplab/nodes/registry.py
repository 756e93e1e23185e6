"""The one place that knows which kind of executor a lab node has.

A node's entry in the lab's summary (hoplab.lab.summary, kept in the state
file) names its kind ("kind", default "netns", a namespace on this machine)
and what that kind needs to reach it. KINDS maps a kind to the function that
makes its executor from that entry: a new kind of node (a device over SSH)
is one more entry, and nothing else in hoplab asks which kind a node is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from hoplab.errors import LabError
from hoplab.nodes.executor import Executor
from hoplab.nodes.netns_exec import NetnsExecutor

if TYPE_CHECKING:
    # Only annotations: `lab down` reaches the registry through teardown and should not
    # pay for the planner.
    from hoplab.lab.plan import Plan
    from hoplab.lab.state import LabState

Factory = Callable[[str, Mapping[str, Any]], Executor]


def _netns(node: str, info: Mapping[str, Any]) -> Executor:
    return NetnsExecutor(node, str(info["netns"]))


def _ssh(node: str, info: Mapping[str, Any]) -> Executor:
    # asyncssh is imported only for labs that have devices.
    from hoplab.nodes.ssh_exec import SshExecutor
    from hoplab.nodes.ssh_target import SshTarget

    s = info["ssh"]
    return SshExecutor(SshTarget(
        node=node, destination=str(s["destination"]), port=s.get("port"),
        identity=s.get("identity"), jump=s.get("jump"), known_hosts=s.get("known_hosts"),
        accept_new_host_keys=bool(s.get("accept_new_host_keys"))))


KINDS: dict[str, Factory] = {"netns": _netns, "ssh": _ssh}


def executor_for(node: str, info: Mapping[str, Any]) -> Executor:
    """The executor of one node, from its entry in the lab's summary."""
    kind = str(info.get("kind", "netns"))
    try:
        factory = KINDS[kind]
    except KeyError:
        raise LabError(f"node {node}: unknown node kind {kind!r} "
                       f"(known: {', '.join(sorted(KINDS))})") from None
    return factory(node, info)


def executors(plan: Plan) -> dict[str, Executor]:
    """Every node of a planned lab that is up, by name, in the plan's order."""
    from hoplab.lab.summary import summarize

    return {name: executor_for(name, info)
            for name, info in summarize(plan)["nodes"].items()}


def state_executors(state: LabState) -> dict[str, Executor]:
    """Every node a lab's state file names (`hoplab clean` and teardown after a crash:
    what was recorded, not what a lab file now says)."""
    return {name: executor_for(name, info)
            for name, info in state.summary.get("nodes", {}).items()}


def wire_executors(state: LabState | None) -> dict[str, Executor]:
    """The userspace wires (hoplab-wire) of a lab, by short name ("w.INDEX"): each
    lives in a namespace of its own on this machine, whatever its ends are."""
    if state is None:
        return {}
    return {w["name"]: NetnsExecutor(w["name"], w["netns"])
            for w in state.summary.get("wires", [])}


def close_all(nodes: Mapping[str, Executor]) -> None:
    for ex in nodes.values():
        ex.close()
