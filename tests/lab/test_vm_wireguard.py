"""Kernel WireGuard between two VM routers (docs/vm.md): h1 - r1 - r2 - h2, the r1-r2
link with per-hop WireGuard; r1 and r2 boot Debian's 6.12 kernel, whose wireguard
module carries the tunnel (no wireguard-go runs for them). What h2 receives of 4 MB
sent from h1 crossed the tunnel: r2's wg interface receives at least that many bytes
(iperf3's receiver counts a little less than was sent: its last interval is cut)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hoplab.nodes.registry import executor_for
from tests.helpers.lab import LabUp, UpLab, iperf3, live_pids

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                                 reason="qemu-system-x86 is not installed")]

KERNEL = "debian:6.12.100+deb12-amd64"
LAB = f"""
name = "vwg"
[nodes.h1]
[nodes.r1]
vm = {{ kernel = "{KERNEL}", vcpus = 1, memory = "384M" }}
[nodes.r2]
vm = {{ kernel = "{KERNEL}", vcpus = 1, memory = "384M" }}
[nodes.h2]
[[links]]
between = ["h1", "r1"]
[[links]]
between = ["r1", "r2"]
wireguard = true
[[links]]
between = ["r2", "h2"]
"""
SENT = 4_000_000


def _wg_rx(up: UpLab, node: str) -> tuple[int, str]:
    ex = executor_for(node, up.result.state.summary["nodes"][node])
    try:
        done = ex.run(["sh", "-c", "wg show all transfer; lsmod"], timeout=60)
    finally:
        ex.close()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    rx = sum(int(line.split("\t")[2]) for line in lines if line.count("\t") == 3)
    return rx, done.stdout


def test_kernel_wireguard_carries_a_flow_between_two_vm_routers(lab_up: LabUp,
                                                                 tmp_path: Path) -> None:
    before_go = live_pids("wireguard-go")
    up = lab_up(LAB)
    # The guests' own module, not wireguard-go on this machine.
    assert live_pids("wireguard-go") <= before_go
    rx0, text = _wg_rx(up, "r2")
    assert "\nwireguard " in text, text
    data = iperf3(up.ns("h2"), up.ns("h1"), "h2", "-n", str(SENT), seconds=None)
    received = int(data["end"]["sum_received"]["bytes"])
    assert received >= SENT * 0.8, received
    rx1, _ = _wg_rx(up, "r2")
    # Everything h2 received crossed the tunnel, with WireGuard's overhead on top.
    assert rx1 - rx0 >= received, (rx0, rx1, received)
