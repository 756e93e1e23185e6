"""Taking a lab down: teardown commands, its processes, its namespaces, its files.

Teardown commands run and recorded processes are stopped through each node's
executor (hoplab.nodes.registry, from the nodes the state file names), so a
lab's devices are reached as its namespaces are. Never stops half way: every
step runs even when an earlier one failed, and what went wrong comes back as
warnings.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from hoplab.errors import HoplabError
from hoplab.lab import wire
from hoplab.lab.devices.labgrid import release
from hoplab.lab.devices.nics import give_back_nics
from hoplab.lab.devices.settings import restore
from hoplab.lab.state import ETC_NETNS, LabState
from hoplab.lab.vm.power import is_qemu, power_off
from hoplab.nodes import netns
from hoplab.nodes.executor import ExecutorError, ProcessId
from hoplab.nodes.netns import processes_in
from hoplab.nodes.procs import proc_start_time
from hoplab.nodes.registry import close_all, state_executors, this_machine, wire_executors
from hoplab.nodes.tracking import recorded, recorded_dirs, recorded_undo
from hoplab.nodes.workdir import owner_exited

if TYPE_CHECKING:
    from hoplab.nodes.executor import Executor


def teardown(state: LabState, *, run_hooks: bool = True) -> list[str]:
    """Remove everything the record lists. Returns warnings; never stops half way."""
    warnings: list[str] = []
    live = [n for n in state.namespaces if netns.exists(n)]
    try:
        nodes = {**wire_executors(state), **state_executors(state)}
    except HoplabError as exc:
        warnings.append(str(exc))
        nodes = {}
    if run_hooks:
        for node, argv in _recorded_teardown(state):
            try:
                done = nodes[node].run(argv, timeout=120)
            except (ExecutorError, OSError, TimeoutError, KeyError) as exc:
                # Its namespace is gone (a crash half way), or its device cannot be reached.
                warnings.append(f"node {node}: teardown {' '.join(argv)}: {exc}")
                continue
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                warnings.append(f"node {node}: teardown {' '.join(argv)}: "
                                f"exit {done.returncode}: {' '.join(tail)}")
    for proc in recorded(state):
        if is_qemu(proc):
            continue    # a VM is powered off once the processes in it are stopped
        # A process of a node the record does not name (an older record) is this machine's.
        ex = nodes.get(proc.node) or this_machine(proc.node)
        try:
            ex.stop_recorded(ProcessId(proc.node, proc.pid, proc.start))
        except HoplabError as exc:
            warnings.append(f"{proc.role} on {proc.node} (pid {proc.pid}): {exc}")
    warnings += _undo_recorded(state, nodes)
    warnings += _remove_device_dirs(state, nodes)
    warnings += power_off(state, nodes)

    # Devices: teardown commands, then offloads and sysctls back as recorded; host NICs
    # back to this machine before their namespaces go (a veth would die with them).
    warnings += restore(state, nodes)
    close_all(nodes)
    if state.labgrid:
        # The devices are put back: their labgrid places can go to someone else.
        warnings += release(state)
    warnings += give_back_nics(state)
    wire.forget_exited()
    warnings += kill_leftovers(live)
    warnings += delete_namespaces(live)
    for ns in state.namespaces:
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)
    shutil.rmtree(state.rundir, ignore_errors=True)
    state.path.unlink(missing_ok=True)
    return warnings


def _undo_recorded(state: LabState, nodes: Mapping[str, Executor]) -> list[str]:
    """What a test put on a node and a killed run left (an nft table on a device), taken
    away by the command the test logged with it."""
    warnings = []
    for node, argv in recorded_undo(state):
        try:
            done = nodes[node].run(argv, timeout=30)
        except (ExecutorError, OSError, TimeoutError, KeyError) as exc:
            warnings.append(f"node {node}: {' '.join(argv)}: {exc}")
            continue
        # Already gone (the run took it away and was killed before it could say so).
        if done.returncode != 0 and "No such file" not in done.stderr:
            warnings.append(f"node {node}: {' '.join(argv)}: exit {done.returncode}: "
                            f"{(done.stderr or done.stdout).strip()[:200]}")
    return warnings


def _remove_device_dirs(state: LabState, nodes: Mapping[str, Executor]) -> list[str]:
    """Run directories a SIGKILL left on devices (perf's data, a server's files), each
    only once the hoplab process it is named after has exited: /tmp on OpenWrt is RAM."""
    warnings = []
    for node, path in recorded_dirs(state):
        where = PurePosixPath(path)
        if str(where.parent) != "/tmp" or not owner_exited(where.name) or node not in nodes:
            continue
        try:
            done = nodes[node].run(["rm", "-rf", str(where)], timeout=30)
        except (ExecutorError, OSError, TimeoutError) as exc:
            warnings.append(f"node {node}: cannot remove {where}: {exc}")
            continue
        if done.returncode != 0:
            warnings.append(f"node {node}: cannot remove {where}: {done.stderr.strip()}")
    return warnings


def _recorded_teardown(state: LabState) -> list[tuple[str, list[str]]]:
    out = []
    for node, info in state.summary.get("nodes", {}).items():
        for argv in info.get("teardown", []):
            out.append((node, list(argv)))
    return out


#: How long a SIGKILLed leftover may take to exit (a Go daemon's threads, a busy machine).
LEFTOVER_EXIT_S = 5.0


def kill_leftovers(namespaces: list[str]) -> list[str]:
    """SIGKILL whatever still lives inside these namespaces (hoplab owns them), and wait
    until it has exited: a process that is still dying runs on after its lab is gone."""
    killed: list[str] = []
    dying: dict[int, int] = {}
    for ns, pids in processes_in(namespaces).items():
        for pid in pids:
            start = proc_start_time(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(f"killed pid {pid}, left running inside {ns}")
            if start is not None:
                dying[pid] = start
    deadline = time.monotonic() + LEFTOVER_EXIT_S
    # Gone, or a zombie (no start time): nothing of it runs any more.
    while any(proc_start_time(pid) == start for pid, start in dying.items()):
        if time.monotonic() > deadline:
            still = sorted(p for p, s in dying.items() if proc_start_time(p) == s)
            killed.append(f"pids {still} still running {LEFTOVER_EXIT_S:g} s after SIGKILL")
            break
        time.sleep(0.01)
    return killed


def delete_namespaces(namespaces: list[str]) -> list[str]:
    """Delete them all in one batch that goes on past a failure; say which failed."""
    if not namespaces:
        return []
    subprocess.run(["ip", "-force", "-batch", "-"],
                   input="".join(f"netns del {n}\n" for n in namespaces),
                   capture_output=True, text=True, check=False)
    return [f"namespace {n} could not be deleted" for n in namespaces if netns.exists(n)]
