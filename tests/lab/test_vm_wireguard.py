"""Kernel WireGuard between two VM routers (docs/vm.md): h1 - r1 - r2 - h2, the r1-r2
link with per-hop WireGuard; r1 and r2 boot Debian's 6.12 kernel, whose wireguard
module carries the tunnel (no wireguard-go runs for them). 4 MB sent from h1 over TCP
and read by h2 to the end crossed the tunnel: r2's wg interface receives them, each
segment with its IP and TCP headers and WireGuard's data header and tag on top.
(iperf3's byte count was not used: its receiver stops counting when the sender has
written its last byte, so what was in flight is cut, 20 % of it through TCG guests.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.nodes.registry import executor_for
from tests.helpers.lab import LabUp, UpLab, live_pids, run_in, stop, wait_listening

pytestmark = [pytest.mark.root, pytest.mark.pairs,
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
PORT = 5301
# A segment through the tunnel: the guests' wg MTU is 1420, so at most 1368 bytes of
# payload (IPv4 and TCP with timestamps: 52) ride in one WireGuard data message, whose
# header and tag add 32 more (and padding to 16 bytes).
MAX_PAYLOAD, PER_SEGMENT = 1368, 52 + 32
RECEIVER = ("import socket, sys\n"
            "s = socket.create_server(('0.0.0.0', int(sys.argv[1])))\n"
            "c, _ = s.accept(); n = 0\n"
            "while (b := c.recv(1 << 16)):\n"
            "    n += len(b)\n"
            "print(n)\n")
SENDER = ("import socket, sys\n"
          "c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)\n"
          "c.sendall(bytes(int(sys.argv[3]))); c.shutdown(socket.SHUT_WR)\n"
          "c.recv(1)\n")


def _transfer(up: UpLab) -> int:
    """SENT bytes h1 -> h2 over one TCP connection; what h2 read up to the end."""
    server = subprocess.Popen(["ip", "netns", "exec", up.ns("h2"), sys.executable, "-c",
                               RECEIVER, str(PORT)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(up.ns("h2"), PORT, server)
        sent = run_in(up.ns("h1"), sys.executable, "-c", SENDER, "h2-v4", str(PORT),
                      str(SENT), timeout=90)
        assert sent.returncode == 0, sent.stderr
        out, err = server.communicate(timeout=30)
        assert server.returncode == 0, err
        return int(out)
    finally:
        stop(server)


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
    assert _transfer(up) == SENT
    rx1, _ = _wg_rx(up, "r2")
    # Every byte crossed the tunnel, with at least the overhead of the fewest segments
    # that can carry them (more, smaller segments only add to it).
    least = SENT + -(-SENT // MAX_PAYLOAD) * PER_SEGMENT
    print(f"r2's wg received {rx1 - rx0} bytes for {SENT} sent; at least {least}")
    assert least <= rx1 - rx0 <= least * 1.01, (rx0, rx1, least)   # measured: +0.02 %
