"""The labels that say which devices a run ran on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hoplab.spec.model import Lab


def device_labels(lab: Lab, nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Labels `device` and `firmware` of a run on a lab with devices, from each device's
    facts in the run's metadata (`nodes`): its model (else the host SSH reaches) and its
    firmware, so runs of two devices or two builds never fall in one group by accident.
    One device gives its values; several give "node=value" pairs. A lab with VMs gives
    `kernel` likewise."""
    found: dict[str, list[tuple[str, str]]] = {"device": [], "firmware": []}
    for node in lab.devices():
        facts = nodes.get(node.name, {})
        assert node.ssh is not None
        found["device"].append((node.name, str(facts.get("model") or node.ssh.host)))
        firmware = facts.get("firmware")
        if firmware:
            found["firmware"].append((node.name, str(firmware)))
    out: dict[str, str] = {}
    # A VM's kernel: the release it booted (its facts), as `compare`, `trend --by kernel`
    # and `bisect` group runs by.
    vms = [n for n in lab.nodes if n.vm is not None]
    kernels = [(n.name, str(nodes.get(n.name, {}).get("kernel")
                            or (n.vm.kernel or "").removeprefix("debian:") if n.vm else ""))
               for n in vms]
    # A firmware image's VM: its firmware as its facts read it (OpenWrt's release),
    # as a device's.
    images = [n for n in vms if n.vm is not None and n.vm.image is not None]
    for n in images:
        firmware = nodes.get(n.name, {}).get("firmware")
        if firmware:
            found["firmware"].append((n.name, str(firmware)))
    if len(kernels) == 1:
        out["kernel"] = kernels[0][1]
    elif kernels:
        out["kernel"] = ", ".join(f"{n}={v}" for n, v in kernels)
    for key, pairs in found.items():
        if len(pairs) == 1 and len(lab.devices()) + len(images) == 1:
            out[key] = pairs[0][1]
        elif pairs:
            out[key] = ", ".join(f"{n}={v}" for n, v in pairs)
    return out
