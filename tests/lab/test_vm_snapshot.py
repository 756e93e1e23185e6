"""VM routers resumed from a snapshot (hoplab.lab.vm.snapshot, docs/vm.md), through the
CLI as a user brings a lab up twice: h1 and h2, each linked to r1 and to r2, so the two
routers are the same kind of VM. The second `lab up` resumes both from one snapshot, and
each must still be its own machine: its own MACs (the plan's), its own random numbers
(its kernel reseeded by vmgenid: two guests restored from one snapshot would otherwise
draw the same), this machine's wall clock, and routes that forward."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from hoplab.lab.vm import snapshot, taps
from tests.helpers.lab import hoplab, lab_namespaces, new_lab_name, remove_lab, run_in
from tests.lab.test_vm import lab_qemus

pytestmark = [pytest.mark.root, pytest.mark.alone,
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                                 reason="qemu-system-x86 is not installed")]

RELEASE = "6.12.100+deb12-amd64"
LAB = f"""
[nodes.h1]
[nodes.h2]
[nodes.r1]
vm = {{ kernel = "debian:{RELEASE}", vcpus = 2, memory = "512M" }}
[nodes.r2]
vm = {{ kernel = "debian:{RELEASE}", vcpus = 2, memory = "512M" }}
[[links]]
between = ["h1", "r1"]
[[links]]
between = ["r1", "h2"]
[[links]]
between = ["h1", "r2"]
[[links]]
between = ["r2", "h2"]
"""


def _guest(name: str, node: str, script: str) -> str:
    done = hoplab("lab", "exec", name, node, "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _up(file: Path) -> dict[str, Any]:
    done = hoplab("lab", "up", "--json", str(file), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def test_two_routers_resumed_from_one_snapshot_are_each_their_own(tmp_path: Path) -> None:
    name = new_lab_name()
    file = tmp_path / f"{name}.toml"
    file.write_text(f'name = "{name}"\n' + LAB)
    try:
        # The first up makes the snapshot if no lab has (one router boots and is
        # snapshotted at its checkpoint); the second resumes both from it.
        for _ in range(2):
            nodes = _up(file)["nodes"]
            starts = {n: e["vm"]["start"] for n, e in nodes.items() if e.get("vm")}
            if set(starts.values()) == {"restored"}:
                break
            down = hoplab("lab", "down", name)
            assert down.returncode == 0, down.stderr
        assert starts == {"r1": "restored", "r2": "restored"}
        seen = {}
        for node in ("r1", "r2"):
            before = time.time()
            out = _guest(name, node, "cat /proc/sys/kernel/random/boot_id; date +%s; "
                                      "dmesg | grep -c 'virtual machine fork'; "
                                      "cat /sys/class/net/eth0/address "
                                      "/sys/class/net/eth1/address").split()
            after = time.time()
            boot_id, clock, reseeds, *macs = out
            seen[node] = boot_id
            assert reseeds == "1"
            # Read while `lab exec` ran (seconds over SSH under TCG); set to the second
            # (as a boot's RTC reading is), so up to a second behind this machine's.
            assert int(before) - 1 <= int(clock) <= after, (before, clock, after)
            # The plan's MACs (the snapshot had its maker's), on the lab's names.
            links = [0, 1] if node == "r1" else [2, 3]
            assert macs == [taps.mac(name, node, i) for i in links]
        assert seen["r1"] != seen["r2"]
        # Each forwards: h1 reaches both of h2's addresses, one through each router.
        targets = [a.split("/")[0] for i in nodes["h2"]["interfaces"]
                   for a in i["addresses"] if ":" not in a]
        assert len(targets) == 2
        for target in targets:
            ping = run_in(nodes["h1"]["netns"], "ping", "-c", "1", "-W", "5", target)
            assert ping.returncode == 0, ping.stdout
    finally:
        remove_lab(name)
    assert not lab_namespaces(name) and not lab_qemus(name)


def test_a_snapshot_qemu_cannot_load_is_removed_and_its_vms_boot(tmp_path: Path) -> None:
    """A snapshot cut short (a full disk, a QEMU upgraded in place): QEMU exits before
    its monitor greets; lab up removes the snapshot, says so, and boots the VMs that
    were to resume from it, on the taps the lab made for them: they forward."""
    name = new_lab_name()
    file = tmp_path / f"{name}.toml"
    file.write_text(f'name = "{name}"\n' + LAB)
    try:
        _up(file)       # makes the snapshot if no lab has
        assert hoplab("lab", "down", name).returncode == 0
        # The one its VMs resumed from, or the one r1 made: the most recently used.
        made = max(snapshot.snapshot_dir().glob(f"*{snapshot.SUFFIX}"),
                   key=lambda p: p.stat().st_mtime_ns)
        with open(made, "r+b") as f:
            f.truncate(1_000_000)
        done = hoplab("lab", "up", "--json", str(file), timeout=300)
        assert done.returncode == 0, done.stderr
        warnings = [ln for ln in done.stderr.splitlines() if ln.startswith("warning: ")]
        assert len(warnings) == 2, done.stderr
        for node, line in zip(("r1", "r2"), sorted(warnings), strict=True):
            assert line.startswith(f"warning: VM {node}: QEMU could not resume from "
                                   f"{made} (it is removed: QEMU's messages are in "), line
            assert line.endswith("), and the VM booted instead"), line
        assert not made.exists()
        nodes = json.loads(done.stdout)["nodes"]
        assert {nodes[n]["vm"]["start"] for n in ("r1", "r2")} == {"booted"}
        # QEMU's own words on the snapshot it could not load, kept beside the new log.
        kept = Path(nodes["r1"]["vm"]["dir"]) / "qemu.1.log"
        assert "qemu-system-x86_64" in kept.read_text(), kept.read_text()
        targets = [a.split("/")[0] for i in nodes["h2"]["interfaces"]
                   for a in i["addresses"] if ":" not in a]
        for target in targets:
            ping = run_in(nodes["h1"]["netns"], "ping", "-c", "1", "-W", "5", target)
            assert ping.returncode == 0, ping.stdout
    finally:
        remove_lab(name)
    assert not lab_namespaces(name) and not lab_qemus(name)
