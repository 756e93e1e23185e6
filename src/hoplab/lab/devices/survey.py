"""What a lab's devices show, and whether they can serve it, found touching nothing on
them: the NICs it attaches, each device reached, its addresses read and every tool the
lab and its tests need looked for. `lab up` asks this before it changes anything
(hoplab.lab.build), and an experiment before its first run (check_devices).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from hoplab.lab.devices import addresses, labgrid, nics, reach
from hoplab.lab.devices import tools as device_tools
from hoplab.nodes.executor import Executor
from hoplab.nodes.registry import executor_for
from hoplab.spec.model import Lab


def check_devices(lab: Lab, tools: Mapping[str, Collection[str]] | None = None,
                  why: Mapping[str, str] | None = None) -> None:
    """Everything lab up checks about a lab's NICs and devices, touching nothing: for an
    experiment to refuse (exit 2) before its first run rather than fail every run."""
    if not lab.devices() and not any(lk.attach for lk in lab.links):
        return
    nics.check_nics(lab)
    lab = labgrid.look_up(lab)
    execs = reach.connect(lab, executor_for)
    try:
        read_devices(lab, execs, tools, why)
    finally:
        reach.close(execs.values())


def read_devices(lab: Lab, execs: Mapping[str, Executor],
                 tools: Mapping[str, Collection[str]] | None,
                 why: Mapping[str, str] | None) -> Lab:
    """The lab with its devices' addresses, once each device is found to have every tool
    the lab and its tests need (touching nothing on it)."""
    resolved = addresses.resolve(lab, views(execs))
    needs = device_tools.tools_needed(resolved)
    for node, wanted in (tools or {}).items():
        needs.setdefault(node, set()).update(wanted)
    device_tools.check_tools(resolved, execs, needs, why)
    return resolved


def views(execs: Mapping[str, Executor]) -> dict[str, addresses.DeviceView]:
    """What each device shows, read from all of them at once."""
    from concurrent.futures import ThreadPoolExecutor

    items = list(execs.values())
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(items)))) as pool:
        return dict(zip(execs, pool.map(addresses.view, items), strict=True))
