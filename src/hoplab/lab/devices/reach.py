"""Reaching a lab's devices over SSH: the entry that says how (kept in the lab's
summary and state, so a later process reaches them too), and one executor per device,
connected in parallel, from the executor registry."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hoplab.errors import SpecError, UsageError
from hoplab.lab.devices.errors import spec_error
from hoplab.nodes.executor import Executor, ExecutorError
from hoplab.spec.model import Lab, Node

Connect = Callable[[str, Mapping[str, Any]], Executor]


def ssh_entry(node: Node, lab: Lab) -> dict[str, Any]:
    """A device's entry in the lab's summary and state: what the executor registry
    (hoplab.nodes.registry) needs to reach it again, from a later process too."""
    assert node.ssh is not None
    t = node.ssh
    entry: dict[str, Any] = {"kind": node.kind, "ssh": {
        "destination": t.destination, "port": t.port, "identity": t.identity,
        "jump": t.jump, "known_hosts": t.known_hosts,
        "accept_new_host_keys": lab.accept_new_host_keys}}
    if node.labgrid is not None:
        # Where the destination came from, for lab status.
        entry["labgrid"] = {"place": node.labgrid.place}
    return entry


def connect(lab: Lab, factory: Connect) -> dict[str, Executor]:
    """One executor per device, connected in parallel; an unreachable or refusing
    device is a SpecError at its `ssh` key, naming it and why."""
    devices = lab.devices()
    if not devices:
        return {}

    def one(node: Node) -> Executor:
        ex = factory(node.name, ssh_entry(node, lab))
        ex.run(["true"], timeout=30)
        return ex

    pool = ThreadPoolExecutor(max_workers=min(16, len(devices)))
    futures = {n.name: pool.submit(one, n) for n in devices}
    pool.shutdown(wait=True)
    got: dict[str, Executor] = {}
    failure: SpecError | None = None
    for node in devices:
        try:
            got[node.name] = futures[node.name].result()
        except (ExecutorError, UsageError, TimeoutError, OSError) as exc:
            if failure is None:
                assert node.ssh is not None
                where = node.ssh.destination + (f", labgrid place {node.labgrid.place}"
                                                if node.labgrid is not None else "")
                failure = spec_error(lab, ("nodes", node.name, node.reached_by),
                                     f"device {node.name} ({where}): {exc}")
    if failure is not None:
        close(got.values())
        raise failure
    return got


def close(executors: Iterable[Executor]) -> None:
    for ex in executors:
        try:
            ex.close()
        except Exception:  # closing is best effort; the connection may be gone
            continue
