"""Fixtures for tests that build real labs in network namespaces (their helpers are in
tests/helpers/lab.py).

Tests marked ``root`` are skipped unless we are root and ``ip`` is installed.
Every lab gets a unique name ("t" + random hex), is always taken down, and at
the end of the session nothing a test created may be left: no ``hoplab-``
namespace of one of our labs and no wireguard-go, iperf3 or nginx process we started.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from hoplab.lab import build
from hoplab.lab.where import netns_prefix
from hoplab.nodes.ssh_exec import SshExecutor
from hoplab.spec import load_lab
from tests.helpers.devices import Device, Farm, farm
from tests.helpers.lab import (
    MADE,
    LabUp,
    UpLab,
    live_pids,
    missing_requirement,
    namespaces,
    new_lab_name,
    pids_in,
    remove_lab,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing_requirement()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


# --- fixtures -------------------------------------------------------------------------


@pytest.fixture
def lab_up(tmp_path: Path) -> Iterator[LabUp]:
    """lab_up(toml_text) or lab_up(path=FILE): write the TOML to tmp_path, build it
    under a unique name with hoplab.lab.build.up, and take it down afterwards."""
    made: list[str] = []

    def up(text: str | None = None, *, path: Path | None = None) -> UpLab:
        if text is None:
            assert path is not None
            text = path.read_text()
        name = new_lab_name()
        file = tmp_path / f"{name}.toml"
        file.write_text(text)
        lab = load_lab(file, name=name)
        made.append(name)
        result = build.up(lab)
        return UpLab(lab, result.plan, result)

    try:
        yield up
    finally:
        for name in made:
            remove_lab(name)


@pytest.fixture
def lab_name() -> Iterator[str]:
    """A fresh lab name for labs built through the CLI; whatever is left is removed."""
    name = new_lab_name()
    try:
        yield name
    finally:
        remove_lab(name)


@pytest.fixture(scope="session", autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    if missing_requirement() is not None:
        yield
        return
    before = live_pids("wireguard-go", "iperf3", "nginx")
    yield
    problems = []
    deadline = time.monotonic() + 5
    while True:
        ours = {n for n in namespaces() for name in MADE if n.startswith(netns_prefix(name))}
        # Other namespaces (somebody else's) may hold their own daemons; ours must be gone,
        # and so must any daemon whose namespace no longer has a name.
        others = namespaces() - ours
        keep = pids_in(others)
        leaked = live_pids("wireguard-go", "iperf3", "nginx") - before - keep
        if (not ours and not leaked) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if ours:
        problems.append(f"namespaces left behind: {sorted(ours)}")
    if leaked:
        problems.append(f"processes left behind: {sorted(leaked)}")
    for name in MADE:
        remove_lab(name)
    for pid in leaked:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if problems:
        pytest.fail("; ".join(problems))


@pytest.fixture(scope="session")
def device_farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    """Emulated devices reached over SSH (tests/helpers/devices.py): `device_farm.add(
    "openwrt-like")` or `add("linux-board")`; all removed at the end of the session."""
    with farm(tmp_path_factory.mktemp("devices")) as f:
        yield f


@pytest.fixture(params=["openwrt-like", "linux-board"])
def dev(request: pytest.FixtureRequest, device_farm: Farm) -> Device:
    """Each kind of emulated device in turn, shared across the session."""
    shared: Device = device_farm.shared(request.param)
    return shared


@pytest.fixture
def ex(dev: Device) -> Iterator[SshExecutor]:
    """An SSH executor for `dev` as node r1, closed after the test."""
    e = SshExecutor(dev.target("r1"))
    try:
        yield e
    finally:
        e.close()
