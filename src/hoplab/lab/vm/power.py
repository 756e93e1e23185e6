"""Taking a lab's VMs down: each is asked to power off (over SSH, at once: its root is
in memory, nothing is lost), then the QEMU that has not exited a moment later is killed
like any recorded process. The moment is counted from the asking, and a guest that was
never reached (hoplab killed while it booted, its host key refused) is not waited for."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hoplab.errors import HoplabError
from hoplab.lab.vm import cgroup
from hoplab.lab.vm.qemu import forget_exited
from hoplab.nodes.each import in_each
from hoplab.nodes.executor import NotReached, ProcessId
from hoplab.nodes.procs import proc_start_time
from hoplab.nodes.registry import this_machine
from hoplab.nodes.tracking import recorded

if TYPE_CHECKING:
    from hoplab.lab.state import LabState
    from hoplab.nodes.executor import Executor
    from hoplab.nodes.procs import Proc

QEMU_SUFFIX = ".qemu"
GRACE_S = 5.0
# A guest up answers over its management tap in well under a second, even under TCG.
ASK_S = 3.0


def qemu_node(vm: str) -> str:
    """The node name a VM's QEMU is recorded under (a process of this machine)."""
    return vm + QEMU_SUFFIX


def is_qemu(proc: Proc) -> bool:
    return proc.node.endswith(QEMU_SUFFIX)


def _alive(proc: Proc) -> bool:
    forget_exited()   # a QEMU of this process that exited is reaped, not a zombie
    return proc_start_time(proc.pid) == proc.start


def power_off(state: LabState, nodes: Mapping[str, Executor]) -> list[str]:
    """Power off every VM of the lab, then kill each QEMU still running."""
    qemus = [p for p in recorded(state) if is_qemu(p) and _alive(p)]

    def ask(proc: Proc) -> bool:
        """Whether the guest may be powering off: asked, or not known not to be."""
        ex = nodes.get(proc.node.removesuffix(QEMU_SUFFIX))
        if ex is None:
            return False
        # Not the look for a reboot a new connection makes first: its own 10 s timeout
        # kept `hoplab clean` of a guest killed while booting at 15.8 s.
        ex.ignore_reboots()
        try:
            ex.run(["sh", "-c", "echo o > /proc/sysrq-trigger"], timeout=ASK_S)
        except NotReached:
            return False    # never asked (still booting, a key refused): killed at once
        except (HoplabError, OSError, TimeoutError):
            pass            # it went down before it could answer, or it is killed below
        return True

    deadline = time.monotonic() + GRACE_S
    asked = [p for p, going in zip(qemus, in_each(qemus, ask), strict=True) if going]
    while any(_alive(p) for p in asked) and time.monotonic() < deadline:
        time.sleep(0.05)
    warnings = []
    for p in qemus:
        try:
            this_machine(p.node).stop_recorded(ProcessId(p.node, p.pid, p.start))
        except HoplabError as exc:
            warnings.append(f"{p.role} (pid {p.pid}): {exc}")
    forget_exited()
    # The QEMUs are gone: their cgroups (cpu = "N%") are empty now.
    for entry in state.summary.get("nodes", {}).values():
        path = (entry.get("vm") or {}).get("cgroup")
        if path and (w := cgroup.remove(Path(path))):
            warnings.append(w)
    return warnings
