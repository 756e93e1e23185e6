"""The one place that knows which kinds of node there are, and makes their executors.

A node's entry in the lab's summary (kept in the state file) names its kind ("kind",
default "netns", a namespace on this machine) and what that kind needs to reach it.
KINDS maps a kind to a NodeKind: the function that makes its executor from that entry,
and what the rest of hoplab may ask of a node of that kind before it is up (whether it
lives on this machine, how to say where it is). A new kind of node is one module in
hoplab.nodes (a transport, hoplab.nodes.transport, under hoplab.nodes.client's Client)
and one entry here; nothing else in hoplab asks which kind a node is.

This module imports no executor until one is made: the lab file's loader asks it what a
kind can do, and `lab down` should not pay for SSH.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hoplab.errors import LabError

if TYPE_CHECKING:
    from hoplab.nodes.executor import Executor
    from hoplab.nodes.netns_exec import NetnsExecutor
    from hoplab.nodes.ssh_exec import SshExecutor

Factory = Callable[[str, Mapping[str, Any]], "Executor"]


def _nowhere(_entry: Mapping[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class NodeKind:
    """A kind of node: who builds one, where its links end, how commands reach it.

    The defaults are a device's: a machine of its own, which hoplab reaches and never
    builds, whose links end on its own interfaces (read from it, never set)."""
    make: Factory
    # Who builds it: "namespace" (the lab engine makes a network namespace here),
    # "qemu" (hoplab boots a virtual machine here, hoplab.lab.vm), "nobody" (it exists).
    builds: str = "nobody"
    # Where its links end: "namespace" (veths in its namespace, configured there),
    # "guest" (NICs hoplab gives it and configures through its transport), "own" (its
    # own interfaces, whose addresses are read at lab up).
    links: str = "own"
    # How commands reach it: "namespace" (processes of this machine, entered into its
    # namespace) or "ssh".
    transport: str = "ssh"
    # Where a node of this kind is, for `lab up`'s table of nodes ("device, ssh
    # root@192.0.2.1"); None where the role (router, host) says it all.
    describe: Callable[[Mapping[str, Any]], str | None] = _nowhere
    # The keys of a lab file's [nodes.NAME] table that declare a node of this kind
    # (none: the default kind).
    keys: tuple[str, ...] = ()

    @property
    def local(self) -> bool:
        """A namespace of this machine: its processes, tools and kernel are this
        machine's."""
        return self.transport == "namespace"


def _netns(node: str, info: Mapping[str, Any]) -> Executor:
    from hoplab.nodes.netns_exec import NetnsExecutor

    return NetnsExecutor(node, str(info["netns"]))


def _ssh(node: str, info: Mapping[str, Any]) -> SshExecutor:
    # asyncssh is imported only for labs that have devices.
    from hoplab.nodes.ssh_exec import SshExecutor
    from hoplab.nodes.ssh_target import SshTarget

    s = info["ssh"]
    return SshExecutor(SshTarget(
        node=node, destination=str(s["destination"]), port=s.get("port"),
        identity=s.get("identity"), jump=s.get("jump"), known_hosts=s.get("known_hosts"),
        accept_new_host_keys=bool(s.get("accept_new_host_keys"))))


def _vm(node: str, info: Mapping[str, Any]) -> Executor:
    ex = _ssh(node, info)
    # A VM booting a kernel hoplab gives it runs this machine's root, read-only: its
    # tools are this machine's files (a firmware image's are its own).
    shared = (info.get("vm") or {}).get("shared_root")
    if shared is not None:
        ex.shared_root = dict(shared)
    return ex


def _vm_where(info: Mapping[str, Any]) -> str:
    vm = info.get("vm") or {}
    share = f", {vm['cpu_pct']:g}% CPU per vCPU" if vm.get("cpu_pct") else ""
    source = str(vm.get("kernel") or "")
    # A firmware image: its file's name, then its kernel's release once it is up.
    image = f"{source.rpartition('/')[2]}, " if source.startswith("image:") else ""
    return (f"vm, {image}{vm.get('release') or '?'}, {vm.get('vcpus', '?')} vCPU, "
            f"{vm.get('accel', '?')}{share}")


def _ssh_where(info: Mapping[str, Any]) -> str:
    place = (info.get("labgrid") or {}).get("place")
    return f"device, {f'labgrid place {place}, ' if place else ''}ssh {info['ssh']['destination']}"


KINDS: dict[str, NodeKind] = {
    "netns": NodeKind(_netns, builds="namespace", links="namespace", transport="namespace"),
    "ssh": NodeKind(_ssh, describe=_ssh_where, keys=("ssh", "labgrid")),
    # A QEMU virtual machine booting a chosen kernel: built here, reached over SSH on
    # its management path (the entry's "ssh" is filled in when it is planned).
    "vm": NodeKind(_vm, builds="qemu", links="guest", describe=_vm_where, keys=("vm",)),
}
DEFAULT = "netns"


def kind(name: str, node: str = "") -> NodeKind:
    """The kind called `name`; a LabError naming the node and the known kinds if none."""
    try:
        return KINDS[name]
    except KeyError:
        who = f"node {node}: " if node else ""
        raise LabError(f"{who}unknown node kind {name!r} "
                       f"(known: {', '.join(sorted(KINDS))})") from None


def kind_of(node: str, info: Mapping[str, Any]) -> NodeKind:
    """The kind of a node from its entry in the lab's summary."""
    return kind(str(info.get("kind", DEFAULT)), node)


def declared(keys: Collection[str]) -> str:
    """The kind of a lab file's node whose table has `keys` (the first kind that one of
    them declares; the default kind if none)."""
    return next((name for name, k in KINDS.items() if set(k.keys) & set(keys)), DEFAULT)


def executor_for(node: str, info: Mapping[str, Any]) -> Executor:
    """The executor of one node, from its entry in the lab's summary."""
    return kind_of(node, info).make(node, info)


class Placed(Protocol):
    """A planned lab (hoplab.lab.plan.Plan): each node's entry, as the summary has it."""

    def node_entries(self) -> Mapping[str, Mapping[str, Any]]: ...


class Recorded(Protocol):
    """A lab's state record (hoplab.lab.state.LabState): what it says was built."""

    @property
    def summary(self) -> dict[str, Any]: ...


def executors(plan: Placed) -> dict[str, Executor]:
    """Every node of a planned lab that is up, by name, in the plan's order."""
    return {name: executor_for(name, info) for name, info in plan.node_entries().items()}


def state_executors(state: Recorded) -> dict[str, Executor]:
    """Every node a lab's state file names (`hoplab clean` and teardown after a crash:
    what was recorded, not what a lab file now says)."""
    return {name: executor_for(name, info)
            for name, info in state.summary.get("nodes", {}).items()}


def wire_executors(state: Recorded | None) -> dict[str, Executor]:
    """The userspace wires (hoplab-wire) of a lab, by short name ("w.INDEX"): each
    lives in a namespace of its own on this machine, whatever its ends are, and gives
    its counters file to the samplers."""
    if state is None:
        return {}
    return {w["name"]: in_namespace(w["name"], w["netns"], stats=w.get("stats"))
            for w in state.summary.get("wires", [])}


def in_namespace(node: str, netns: str | None, *, stats: str | None = None
                 ) -> NetnsExecutor:
    """A namespace of this machine as a node (None: this machine as it is), for the lab
    engine, which makes the namespaces: their configuration, daemons and checks."""
    from hoplab.nodes.netns_exec import NetnsExecutor

    return NetnsExecutor(node, netns, stats=stats)


def this_machine(node: str = "host") -> Executor:
    """This machine as it is (perf's host-wide recording; a process a record names
    with no node entry of its own)."""
    return in_namespace(node, None)


def close_all(nodes: Mapping[str, Executor]) -> None:
    for ex in nodes.values():
        ex.close()
