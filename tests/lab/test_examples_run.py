"""Every experiment in examples/ runs to its end, as a user starts it, shortened with
--set (issue 27: router-throughput.toml failed at 1518-byte frames through WireGuard,
and nothing ran it). A new example fails test_every_example_is_run_or_excluded until it
is given its short settings here or a stated reason not to run here. `make test` runs
this file on one worker of its pool, beside the other files (the examples have no timing
bounds), but those that send unpaced frames alone and those that boot VMs two at a time
(tests/helpers/alone.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hoplab.store import open_store
from tests.helpers.lab import HOPLAB, hoplab, lab_namespaces

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Each example's shortest run: one repetition, short tests, and where a matrix is large
# one value of an axis (the one whose failure the issue saw kept: WireGuard on).
SHORT: dict[str, list[str]] = {
    "demo.toml": ["duration=1s", "idle=0.5s"],
    "exit-70ms-run.toml": ["duration=1s"],
    "hop-sweep.toml": ["hops=2", "duration=1s"],
    "nat-regression.toml": ["duration=2s"],
    # The shaped variant: the wire's per-host fq_codel, pages and RPM under it (qos=off is
    # a plain lab, every other example's).
    "qos-under-load.toml": ["duration=3s", "qos=on"],
    "quickstart.toml": ["duration=1s", "idle=0.5s"],
    "router-mode.toml": ["duration=1s"],
    "router-throughput.toml": ["trial=0.2s", "drain=0.1s", "frame_sizes=[64, 1518]",
                               "precision=10%"],
    "sfq-perturb.toml": ["duration=3s"],
    "wireguard-profile.toml": ["duration=2s"],
    # VM routers: one variant (one boot), the one test_vm.py does not cover.
    "vm/bufferbloat.toml": ['lab.link_defaults.forward.qdisc=["cake"]', "duration=3s",
                            "idle=1s"],
    "vm/wireguard-relay.toml": ["wireguard=true", "tests.bulk.duration=2s",
                                "tests.flood.duration=2s"],
}
# Examples another test runs to its end, and which.
RUN_ELSEWHERE = {
    "nat-versions/versions.toml": "tests/lab/test_nat_versions.py runs it as "
                                  "docs/versions.md tells a user to, with its trend",
    "vm/kernels.toml": "tests/lab/test_vm_kernels.py runs it as docs/vm.md tells a user "
                       "to, with its report (two VM boots: once is enough)",
    "vm/firmware.toml": "tests/lab/test_vm_firmware.py runs it on two stand-in firmware "
                        "images (the user's own images are not here)",
}
# Directories of examples that need more than this machine, and where they are run.
EXCLUDED = {
    "devices": "real routers over SSH: tests/lab/test_devices_*.py run them against "
               "emulated devices",
    "vm": "virtual machines hoplab boots: their own tests, but for those in SHORT",
}


def _experiments() -> list[str]:
    """Every experiment file (a lab and tests) under examples/, relative to it."""
    out = []
    for path in sorted(EXAMPLES.rglob("*.toml")):
        text = path.read_text()
        if "[[tests]]" in text and any(line.startswith("lab =") for line in text.splitlines()):
            out.append(path.relative_to(EXAMPLES).as_posix())
    return out


def test_every_example_is_run_or_excluded() -> None:
    found = _experiments()
    excluded = [f for f in found
                if (f.split("/")[0] in EXCLUDED and f not in SHORT) or f in RUN_ELSEWHERE]
    assert sorted(set(found) - set(excluded)) == sorted(SHORT)
    assert set(RUN_ELSEWHERE) <= set(found)
    assert "devices/router-throughput.toml" in excluded


def _param(example: str) -> Any:
    """Its test; kept from the pool's lab tests where it keeps both cores busy: the frame
    generator's unpaced ceiling (alone), VM routers under TCG (beside one other such
    test: pairs, tests/helpers/alone.py)."""
    if example.startswith("vm/"):
        return pytest.param(example, marks=[pytest.mark.pairs])
    heavy = example == "router-throughput.toml"
    return pytest.param(example, marks=[pytest.mark.alone] if heavy else [])


@pytest.mark.root
@pytest.mark.parametrize("example", [_param(e) for e in sorted(SHORT)])
def test_the_example_runs_to_its_end(example: str, tmp_path: Path, lab_name: str) -> None:
    sets = [arg for s in SHORT[example] for arg in ("--set", s)]
    db = tmp_path / "runs.db"
    # As a CI log sees it: stdout no terminal, so a line per finished run (issue 27).
    proc = hoplab("run", str(EXAMPLES / example), *sets, "--repeat", "1", "--db", str(db),
                  "--lab-name", lab_name, timeout=600)
    assert lab_namespaces(lab_name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open_store(str(db)) as store:
        runs = store.list_runs({})
    failed = [(r.id, r.test, r.status) for r in runs if r.status != "ok"]
    assert runs and not failed, failed
    lines = [line for line in proc.stdout.splitlines() if line.startswith("run ")]
    assert [line.split(":")[0].rsplit(" ", 1) for line in lines] == [
        [f"run {i}/{len(runs)}", "ok"] for i in range(1, len(runs) + 1)], proc.stdout


def _zombies(parent: int) -> set[int]:
    """The iperf3 children of `parent` that have exited and not been reaped."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:]
        state, ppid = rest.split()[:2]
        if comm == "iperf3" and state == "Z" and int(ppid) == parent:
            out.add(int(stat.parent.name))
    return out


@pytest.mark.root
def test_the_throughput_search_reaps_its_iperf3s(tmp_path: Path, lab_name: str) -> None:
    # Issue 27: each frame size's iperf3 servers were left running, the next size's
    # failed to bind and stayed <defunct> until the run ended. A client is reaped within
    # milliseconds of its exit (the search polls it); a zombie seen on two looks a
    # second apart was left.
    proc = subprocess.Popen(
        [*HOPLAB, "run", str(EXAMPLES / "router-throughput.toml"), "--set", "wireguard=false",
         "--set", "trial=0.2s", "--set", "drain=0.1s", "--set", "precision=10%",
         "--set", "frame_sizes=[64, 128, 256, 512]", "--set", "latency=false",
         "--db", str(tmp_path / "r.db"), "--lab-name", lab_name],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    left: set[int] = set()
    try:
        seen: set[int] = set()
        while proc.poll() is None:
            now = _zombies(proc.pid)
            left |= now & seen
            seen = now
            time.sleep(1.0)
    finally:
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert not left, f"iperf3 zombies of hoplab: {sorted(left)}"
