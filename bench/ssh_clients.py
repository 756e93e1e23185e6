"""Which SSH client hoplab uses, by measurement: asyncssh against the system OpenSSH
client with ControlMaster, on connect time and per-command cost, against an emulated
OpenWrt device (dropbear) and an emulated Linux board (OpenSSH's sshd).

    .venv/bin/python bench/ssh_clients.py [--n 50]

Prints the median and 90th percentile of each (ms). Needs root (emulated devices).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncssh

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.devices import Device, farm


def _fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {1000 * statistics.median(xs):6.1f}  p90 {1000 * xs[int(0.9 * len(xs))]:6.1f}"


def openssh(dev: Device, n: int, tmp: Path) -> tuple[list[float], list[float]]:
    connects, commands = [], []
    for i in range(max(3, n // 5)):
        sock = tmp / f"cm{i}"
        base = [*dev.ssh_argv()[:-1], "-o", f"ControlPath={sock}"]
        t = time.perf_counter()
        subprocess.run([*base, "-o", "ControlMaster=yes", "-o", "ControlPersist=yes", "-fN",
                        f"root@{dev.address}"], check=True, timeout=10)
        connects.append(time.perf_counter() - t)
        if i == 0:
            for _ in range(n):
                t = time.perf_counter()
                subprocess.run([*base, f"root@{dev.address}", "true"], check=True,
                               timeout=10, capture_output=True)
                commands.append(time.perf_counter() - t)
        subprocess.run([*base, "-O", "exit", f"root@{dev.address}"], capture_output=True,
                       timeout=10, check=False)
    return connects, commands


async def _asyncssh(dev: Device, n: int) -> tuple[list[float], list[float]]:
    connects, commands = [], []
    for i in range(max(3, n // 5)):
        t = time.perf_counter()
        conn = await asyncssh.connect(dev.address, username="root",
                                      client_keys=[str(dev.farm.identity)],
                                      known_hosts=str(dev.farm.known_hosts),
                                      agent_path=None, config=[])
        connects.append(time.perf_counter() - t)
        if i == 0:
            for _ in range(n):
                t = time.perf_counter()
                await conn.run("true", check=True)
                commands.append(time.perf_counter() - t)
        conn.close()
        await conn.wait_closed()
    return connects, commands


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    n = ap.parse_args().n
    with tempfile.TemporaryDirectory() as tmp, farm(Path(tmp)) as f:
        for kind in ("openwrt-like", "linux-board"):
            dev = f.add(kind)
            server = "dropbear" if kind == "openwrt-like" else "OpenSSH sshd"
            oc, ocmd = openssh(dev, n, Path(tmp))
            ac, acmd = asyncio.run(_asyncssh(dev, n))
            print(f"{server:13s} OpenSSH+ControlMaster connect  {_fmt(oc)} ms")
            print(f"{server:13s} OpenSSH+ControlMaster command  {_fmt(ocmd)} ms")
            print(f"{server:13s} asyncssh              connect  {_fmt(ac)} ms")
            print(f"{server:13s} asyncssh              command  {_fmt(acmd)} ms")


if __name__ == "__main__":
    main()
