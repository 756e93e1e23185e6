"""`hoplab clean` leaves a lab another hoplab process still uses (its owner, known by PID
and start time, is alive) unless --force, and says which and why. The labs here are
built by this test process, which is their owner."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from hoplab.lab.clean import in_use
from hoplab.lab.state import LABS_DIR, all_states, find
from hoplab.lab.where import lab_of
from hoplab.nodes.netns import processes_in
from tests.helpers.lab import EXAMPLES, LabUp, hoplab, lab_namespaces, namespaces

pytestmark = [pytest.mark.root]

CHAIN = (EXAMPLES / "chain.toml").read_text()


def test_a_lab_in_use_is_left_unless_forced(lab_up: LabUp) -> None:
    up = lab_up(CHAIN)
    nss = lab_namespaces(up.name)
    assert len(nss) == 4
    cleaned = hoplab("clean", up.name)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"left lab {up.name}: in use by pid {os.getpid()}" in cleaned.stdout
    assert f"hoplab clean --force {up.name} removes it" in cleaned.stdout
    assert lab_namespaces(up.name) == nss
    assert (LABS_DIR / f"{up.name}.json").exists() and (LABS_DIR / up.name / "hosts").exists()
    assert up.run("client", "ping", "-c1", "-W2", "server").returncode == 0
    forced = hoplab("clean", "--force", up.name)
    assert forced.returncode == 0, forced.stderr
    assert f"lab {up.name}: removed (4 namespaces)" in forced.stdout
    assert lab_namespaces(up.name) == set()
    assert find(up.name) is None


def test_a_recycled_owner_pid_does_not_keep_a_lab(lab_up: LabUp) -> None:
    up = lab_up(CHAIN)
    state = find(up.name)
    assert state is not None and state.owner_alive()
    # The owner's PID is alive (it is this process) but started at another time than
    # the recorded owner: the PID was reused, the lab's owner is gone.
    assert state.owner_start is not None
    dataclasses.replace(state, owner_start=state.owner_start - 1).save()
    cleaned = hoplab("clean", up.name)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"lab {up.name}: removed" in cleaned.stdout
    assert lab_namespaces(up.name) == set()


def test_a_lab_whose_owner_exited_is_removed(lab_name: str) -> None:
    made = hoplab("lab", "up", str(EXAMPLES / "chain.toml"), "--name", lab_name)
    assert made.returncode == 0, made.stderr  # `lab up` has exited: nobody uses the lab
    cleaned = hoplab("clean", lab_name)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"lab {lab_name}: removed (4 namespaces)" in cleaned.stdout
    assert lab_namespaces(lab_name) == set()
    again = hoplab("clean", lab_name)
    assert again.stdout.strip() == "nothing to clean"


def test_a_bad_name_is_refused(lab_up: LabUp) -> None:
    bad = hoplab("clean", "../labs")
    assert bad.returncode == 2
    assert "clean NAME: invalid lab name" in bad.stderr


def removable_others(mine: str) -> list[str]:
    """What a plain `hoplab clean` would remove that is not ours: labs of exited owners,
    and namespaces no record claims."""
    states = [s for s in all_states() if s.name != mine]
    claimed = {n for s in all_states() for n in s.namespaces}
    return ([s.name for s in states if not in_use(s)]
            + [n for n in namespaces() if lab_of(n) is not None and n not in claimed])


@pytest.mark.machine
def test_plain_clean_leaves_every_lab_in_use(lab_up: LabUp) -> None:
    up = lab_up(CHAIN)
    others = removable_others(up.name)
    if others:
        pytest.skip(f"hoplab clean would remove labs that are not ours: {others[:3]}")
    in_use_before = {s.name: set(s.namespaces) for s in all_states()}
    pids = processes_in(sorted({n for v in in_use_before.values() for n in v}))
    cleaned = hoplab("clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"left lab {up.name}: in use by pid {os.getpid()}" in cleaned.stdout
    for name, nss in in_use_before.items():
        assert nss <= namespaces(), f"lab {name}, in use, lost namespaces"
        assert (LABS_DIR / f"{name}.json").exists()
    for ns, in_ns in pids.items():
        assert all(Path(f"/proc/{p}").exists() for p in in_ns), f"a process in {ns} was killed"
