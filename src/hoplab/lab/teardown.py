"""Taking a lab down: teardown commands, its processes, its namespaces, its files.

Never stops half way: every step runs even when an earlier one failed, and
what went wrong comes back as warnings.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from hoplab.errors import LabError
from hoplab.lab import netns, wire
from hoplab.lab.state import ETC_NETNS, LabState, stop_process


def check_done(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise LabError(f"{what}: exit {proc.returncode}: {' '.join(tail)}")


def teardown(state: LabState, *, run_hooks: bool = True) -> list[str]:
    """Remove everything the record lists. Returns warnings; never stops half way."""
    warnings: list[str] = []
    live = [n for n in state.namespaces if netns.exists(n)]
    if run_hooks:
        for node, argv in _recorded_teardown(state):
            ns = state.summary["nodes"][node]["netns"]
            if ns not in live:
                continue
            with netns.entered(ns):
                try:
                    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                                          timeout=120)
                    check_done(done, f"node {node}: teardown {' '.join(argv)}")
                except (OSError, subprocess.SubprocessError, LabError) as exc:
                    warnings.append(str(exc))
    for proc in state.processes:
        stop_process(proc)
    wire.forget_exited()
    warnings += kill_leftovers(live)
    warnings += delete_namespaces(live)
    for ns in state.namespaces:
        shutil.rmtree(ETC_NETNS / ns, ignore_errors=True)
    shutil.rmtree(state.rundir, ignore_errors=True)
    state.path.unlink(missing_ok=True)
    return warnings


def _recorded_teardown(state: LabState) -> list[tuple[str, list[str]]]:
    out = []
    for node, info in state.summary.get("nodes", {}).items():
        for argv in info.get("teardown", []):
            out.append((node, list(argv)))
    return out


def kill_leftovers(namespaces: list[str]) -> list[str]:
    """SIGKILL whatever still lives inside these namespaces (hoplab owns them)."""
    killed = []
    for ns, pids in processes_in(namespaces).items():
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(f"killed pid {pid}, left running inside {ns}")
            except ProcessLookupError:
                pass
    return killed


def delete_namespaces(namespaces: list[str]) -> list[str]:
    """Delete them all in one batch that goes on past a failure; say which failed."""
    if not namespaces:
        return []
    subprocess.run(["ip", "-force", "-batch", "-"],
                   input="".join(f"netns del {n}\n" for n in namespaces),
                   capture_output=True, text=True, check=False)
    return [f"namespace {n} could not be deleted" for n in namespaces if netns.exists(n)]


def processes_in(namespaces: list[str]) -> dict[str, list[int]]:
    """PIDs living in each namespace (matched by the namespace's inode)."""
    inodes: dict[tuple[int, int], str] = {}
    for ns in namespaces:
        try:
            st = os.stat(netns.NETNS_DIR / ns)
        except OSError:
            continue
        inodes[(st.st_dev, st.st_ino)] = ns
    found: dict[str, list[int]] = {}
    if not inodes:
        return found
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            st = os.stat(entry / "ns" / "net")
        except OSError:
            continue
        ns_name = inodes.get((st.st_dev, st.st_ino))
        if ns_name is not None:
            found.setdefault(ns_name, []).append(int(entry.name))
    return found
