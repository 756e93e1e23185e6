"""Remove what hoplab left behind, including what a crash left, but not a lab in use.

Only things this hoplab owns are touched: labs listed under its run dir (/run/hoplab/labs
unless HOPLAB_RUN_DIR), namespaces its labs' names mark as theirs (hoplab.lab.where:
never those of a hoplab under another run dir; those of no known owner only with
--force), processes living inside those namespaces, their /etc/netns entries, and the
working directories of runs whose hoplab process has exited (hoplab.nodes.workdir). A
lab whose owner (the process that built it, identified by PID and start time) still
runs is left alone unless forced: another `hoplab run`, or a test, is measuring on it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from hoplab.errors import LabError
from hoplab.lab import where
from hoplab.lab.lock import LabBusy, lab_lock
from hoplab.lab.state import ETC_NETNS, LABS_DIR, LabState, all_states, find
from hoplab.lab.teardown import delete_namespaces, kill_leftovers, teardown
from hoplab.lab.vm import snapshot
from hoplab.nodes import netns, workdir


@dataclass
class Cleaned:
    done: list[str] = field(default_factory=list)  # a line per thing removed
    left: list[str] = field(default_factory=list)  # a line per lab left alone, and why


def in_use(state: LabState) -> bool:
    """Its owner is alive, and is not this process."""
    return state.owner_pid != os.getpid() and state.owner_alive()


def _takes(namespace: str, names: Collection[str], force: bool) -> bool:
    """Whether a namespace no lab record claims is a leftover this clean removes: one of
    this instance's labs' (one of `names`, if given) by its exact name; without names
    and with `force`, also one whose owner cannot be told (an older hoplab's names, a
    killed probe). Never one of a hoplab under another run dir."""
    lab = where.lab_of(namespace)
    if names:
        return lab in names
    return lab is not None or (force and not where.other_instance(namespace))


def _not_taken(left: list[str]) -> list[str]:
    others = [n for n in left if where.other_instance(n)]
    unknown = [n for n in left if n not in others]
    out = []
    if others:
        out.append(f"left {len(others)} namespaces of a hoplab under another "
                   f"HOPLAB_RUN_DIR (e.g. {others[0]}): its own hoplab clean removes them")
    if unknown:
        out.append(f"left {len(unknown)} namespaces no lab of this hoplab (run dir "
                   f"{where.RUN_DIR}) names (e.g. {unknown[0]}); hoplab clean --force "
                   f"removes them")
    return out


def clean(*, force: bool = False, names: Collection[str] = ()) -> Cleaned:
    """Remove labs whose owner has exited (every lab with `force`), and leftovers no lab
    record claims (see _takes). With `names`, only those labs and their leftovers."""
    started = time.time()
    # Listed before the records are read: a lab built meanwhile writes its record before
    # it creates a namespace, so none of its namespaces can pass for an orphan.
    listed = [n for n in netns.listed("hoplab-") if not names or where.lab_of(n) in names]
    out = Cleaned()
    for state in all_states():
        if names and state.name not in names:
            continue
        try:
            # Not while another process builds or takes down a lab of this name (even
            # with --force: its build would go on creating what this removes); the
            # record is read again under the lock, as that process may have changed it.
            with lab_lock(state.name):
                _clean_lab(state.name, force, out)
        except LabBusy as exc:
            out.left.append(_in_use(state) if not force and in_use(state)
                            else f"left lab {state.name}: {exc}")
    # Read again: labs left alone, and labs whose records appeared since, claim theirs.
    remaining = all_states()
    claimed = {n for s in remaining for n in s.namespaces}
    kept = {s.name for s in remaining}
    unclaimed = [n for n in listed if n not in claimed and netns.exists(n)]
    orphans = [n for n in unclaimed if _takes(n, names, force)]
    out.done += kill_leftovers(orphans)
    out.done += delete_namespaces(orphans)
    if orphans:
        out.done.append(f"removed {len(orphans)} leftover namespaces")
    out.left += _not_taken([n for n in unclaimed if n not in orphans])
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.iterdir():
            if d.name.startswith("hoplab-") and _takes(d.name, names, force) \
                    and d.name not in claimed and not netns.exists(d.name):
                shutil.rmtree(d, ignore_errors=True)
    out.done += _debris(started, kept, names)
    # A run's working directory a SIGKILL left (tool outputs, nginx's pages): its process
    # is gone, so nothing writes it any more, whichever lab it ran on.
    out.done += workdir.remove_orphans()
    # A VM snapshot half written when its lab up was killed (hoplab.lab.vm.snapshot).
    for part in snapshot.leftovers():
        part.unlink(missing_ok=True)
        out.done.append(f"removed the partial VM snapshot {part}")
    return out


def _in_use(state: LabState) -> str:
    command = state.owner_command()
    return (f"left lab {state.name}: in use by pid {state.owner_pid}"
            + (f" ({command})" if command else "")
            + f"; hoplab clean --force {state.name} removes it")


def _clean_lab(name: str, force: bool, out: Cleaned) -> None:
    try:
        state = find(name)
    except LabError:
        return      # became unreadable meanwhile: _debris removes it
    if state is None:
        return
    if not force and in_use(state):
        out.left.append(_in_use(state))
        return
    for warning in _remove(state):
        out.done.append(f"{state.name}: {warning}")
    out.done.append(f"lab {state.name}: removed ({len(state.namespaces)} namespaces)")


# A build killed half way may leave its `ip -batch` running, still adding the namespaces
# its record lists; a lab that was still building is watched until none appears for this
# long (at most _SETTLE_MAX_S).
_SETTLE_S = 0.3
_SETTLE_MAX_S = 10.0


def _remove(state: LabState) -> list[str]:
    warnings = teardown(state)
    if state.status != "building":
        return warnings
    now = time.monotonic()
    quiet_until, give_up = now + _SETTLE_S, now + _SETTLE_MAX_S
    while time.monotonic() < min(quiet_until, give_up):
        late = [n for n in state.namespaces if netns.exists(n)]
        if late:
            warnings += kill_leftovers(late) + delete_namespaces(late)
            quiet_until = time.monotonic() + _SETTLE_S
        time.sleep(0.02)
    return warnings


def _debris(started: float, kept: set[str], names: Collection[str]) -> list[str]:
    """Run directories and records no readable record accounts for: half-written or
    unreadable ones. What changed since `started` may be a lab being built now."""
    done: list[str] = []
    if not LABS_DIR.is_dir():
        return done
    for d in LABS_DIR.iterdir():
        stem = d.name.split(".", 1)[0]
        if stem in kept or (names and stem not in names) or _newer(d, started):
            continue
        if d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
        else:
            d.unlink(missing_ok=True)
            if d.suffix == ".json":
                done.append(f"removed unreadable lab record {d.name}")
    return done


def _newer(path: Path, than: float) -> bool:
    try:
        return path.stat().st_mtime >= than
    except OSError:
        return True
