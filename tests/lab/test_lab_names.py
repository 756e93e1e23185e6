"""Names and concurrent labs: `hoplab clean NAME` takes that lab's leftovers only, a lab
of another run dir (HOPLAB_RUN_DIR) is never taken for a leftover, and two `lab up` of
one name cannot both build (one lock per lab name)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.lab.lock import lab_lock
from hoplab.lab.state import LABS_DIR, find
from tests.helpers.lab import (
    EXAMPLES,
    HOPLAB,
    MADE,
    hoplab,
    lab_namespaces,
    namespaces,
    remove_lab,
)

pytestmark = [pytest.mark.root]

CHAIN = str(EXAMPLES / "chain.toml")


def _hoplab_in(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOPLAB, *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False,
                          env=dict(os.environ, HOPLAB_RUN_DIR=str(run_dir)))


@pytest.fixture
def longer_name(lab_name: str) -> Iterator[str]:
    """Another lab's name that starts with `lab_name` and a dash: `t1234abcd-1`."""
    name = f"{lab_name}-1"
    MADE.add(name)
    try:
        yield name
    finally:
        remove_lab(name)


def test_clean_of_a_name_leaves_the_leftovers_of_a_longer_one(
        lab_name: str, longer_name: str) -> None:
    made = hoplab("lab", "up", CHAIN, "--name", longer_name)
    assert made.returncode == 0, made.stderr
    nss = lab_namespaces(longer_name)
    assert len(nss) == 4
    assert not lab_namespaces(lab_name)
    client = next(n for n in nss if n.endswith(".client"))
    sleeper = subprocess.Popen(["ip", "netns", "exec", client, "sleep", "600"],
                               stdin=subprocess.DEVNULL)
    try:
        # Its record gone, its namespaces are leftovers: only `clean LONGER` owns them.
        (LABS_DIR / f"{longer_name}.json").unlink()
        cleaned = hoplab("clean", lab_name)
        assert cleaned.returncode == 0, cleaned.stderr
        assert cleaned.stdout.strip() == "nothing to clean"
        assert lab_namespaces(longer_name) == nss
        assert sleeper.poll() is None, "clean of another lab killed this lab's process"
        cleaned = hoplab("clean", longer_name)
        assert cleaned.returncode == 0, cleaned.stderr
        assert "removed 4 leftover namespaces" in cleaned.stdout
        assert lab_namespaces(longer_name) == set()
        assert sleeper.wait(timeout=30) != 0
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_lab_of_another_run_dir_is_never_a_leftover(lab_name: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    try:
        made = _hoplab_in(run_dir, "lab", "up", CHAIN, "--name", lab_name)
        assert made.returncode == 0, made.stderr
        (lab,) = json.loads(_hoplab_in(run_dir, "lab", "status", "--json").stdout)
        theirs = {node["netns"] for node in lab["nodes"].values()}
        assert len(theirs) == 4 and theirs <= namespaces()
        # This instance has no lab of that name, and the other's namespaces are not its
        # leftovers, though they carry the same lab name.
        assert lab_namespaces(lab_name) == set()
        cleaned = hoplab("clean", lab_name)
        assert cleaned.returncode == 0, cleaned.stderr
        assert cleaned.stdout.strip() == "nothing to clean"
        assert theirs <= namespaces()
        ping = _hoplab_in(run_dir, "lab", "exec", lab_name, "client", "--",
                          "ping", "-c1", "-W2", "server")
        assert ping.returncode == 0, ping.stdout + ping.stderr
        # Its own clean removes it.
        cleaned = _hoplab_in(run_dir, "clean", lab_name)
        assert cleaned.returncode == 0, cleaned.stderr
        assert f"lab {lab_name}: removed (4 namespaces)" in cleaned.stdout
        assert not theirs & namespaces()
    finally:
        _hoplab_in(run_dir, "clean", "--force", lab_name)


def test_a_lab_being_built_elsewhere_is_refused_and_left_alone(lab_name: str) -> None:
    # This process holds the lock as a `lab up` of that name does while it builds.
    with lab_lock(lab_name):
        refused = hoplab("lab", "up", CHAIN, "--name", lab_name)
        assert refused.returncode == 2, refused.stderr
        assert f"lab '{lab_name}' is being built or taken down by another hoplab process " \
               f"(pid {os.getpid()})" in refused.stderr
        assert lab_namespaces(lab_name) == set() and find(lab_name) is None
        down = hoplab("lab", "down", lab_name)
        assert down.returncode == 2 and f"pid {os.getpid()}" in down.stderr
    # Released with the block: the name builds now.
    made = hoplab("lab", "up", CHAIN, "--name", lab_name)
    assert made.returncode == 0, made.stderr
    with lab_lock(lab_name):
        forced = hoplab("clean", "--force", lab_name)
        assert forced.returncode == 0, forced.stderr
        assert f"left lab {lab_name}: lab '{lab_name}' is being built" in forced.stdout
        assert len(lab_namespaces(lab_name)) == 4
    down = hoplab("lab", "down", lab_name)
    assert down.returncode == 0, down.stderr
    assert lab_namespaces(lab_name) == set()


def test_two_ups_of_one_name_build_one_lab(lab_name: str) -> None:
    procs = [subprocess.Popen([*HOPLAB, "lab", "up", CHAIN, "--name", lab_name],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in done)
    assert codes == [0, 2], done
    loser = next(err for code, _, err in done if code == 2)
    assert f"lab '{lab_name}'" in loser or f"lab {lab_name!r}" in loser, loser
    # The winner's lab is whole: its four namespaces, its record, and traffic through it.
    assert len(lab_namespaces(lab_name)) == 4
    state = find(lab_name)
    assert state is not None and state.status == "up"
    ping = hoplab("lab", "exec", lab_name, "client", "--", "ping", "-c1", "-W2", "server")
    assert ping.returncode == 0, ping.stdout + ping.stderr
