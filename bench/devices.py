#!/usr/bin/env python3
"""Connecting to 10 devices and collecting their facts, in parallel (the issue's target:
under 2 s), and TCP throughput through a device with its samplers on against the same
without them (target: at least 97 %). A benchmark, not a test.

Ten emulated devices (tests/helpers/devices.py; half OpenWrt-like with dropbear and
BusyBox, half Linux boards with OpenSSH) are made first, untimed. Then, R times
(default 5), one SshExecutor per device is created in its own thread, connects,
reads the device's uptime and boot id (what every first connection does) and
collects its facts; the wall time from the first thread's start to the last one's
end is one figure. The anchor, printed beside it from the same run: the same
facts of one device alone (so the parallel figure is read against what one costs).

Throughput: an OpenWrt-like device forwards between two namespaces of this machine
(client - device - server, veths, no shaping). One iperf3 TCP flow of --seconds
(default 60) runs from client to server while hoplab's samplers on the device (10 Hz:
CPU, interfaces, TCP, qdiscs, over SSH) are switched on and off every --period s
(default 2). The flow's 0.25 s intervals lying wholly in an "on" or an "off" window,
past its first 0.5 s (switching on connects the sampler's SSH session, which a real
run does once, not every 2 s), are compared by their medians:
interleaving within one flow keeps the shared machine's slow swings of load (runs a
few seconds apart differed by 3x here) out of the comparison. The flow is limited by
this machine's CPUs, which the device, iperf3 and the sampler share: the harshest case.

Run as root:  .venv/bin/python bench/devices.py [--devices 10] [--reps 5]
              [--seconds 60] [--period 2] [--no-throughput] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hoplab.nodes.ssh_exec import SshExecutor
from hoplab.samplers.runner import Samplers, Target
from tests.helpers.devices import Device, Farm, farm

TARGET_S = 2.0
TARGET_RATIO = 0.97
SETTLE_S = 0.5


def facts_of(devices: list[Device]) -> float:
    errors: list[BaseException] = []

    def one(i: int, dev: Device) -> None:
        ex = SshExecutor(dev.target(f"d{i}"))
        try:
            f = ex.facts()
            assert f.values.get("kernel"), f.missing
        except BaseException as e:
            errors.append(e)
        finally:
            ex.close()

    threads = [threading.Thread(target=one, args=(i, d)) for i, d in enumerate(devices)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    if errors:
        raise SystemExit(f"facts failed: {errors[0]!r}")
    return wall


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def forwarding(f: Farm) -> tuple[Device, str, str]:
    """A device between two namespaces: 192.168.251.0/24 (client) and .252 (server)."""
    dev = f.add("openwrt-like")
    cns, sns = f"{dev.netns}c", f"{dev.netns}s"
    for ns, side, net in ((cns, "c", "251"), (sns, "s", "252")):
        _ip("netns", "add", ns)
        dev.cable(f"eth{side}", f"{dev.netns}{side}", netns=ns)
        host_if = f"{dev.netns}{side}"
        _ip("-n", ns, "addr", "add", f"192.168.{net}.2/24", "dev", host_if)
        _ip("-n", ns, "link", "set", host_if, "up")
        _ip("-n", ns, "route", "add", "default", "via", f"192.168.{net}.1")
        for cmd in (["ip", "addr", "add", f"192.168.{net}.1/24", "dev", f"eth{side}"],
                    ["ip", "link", "set", f"eth{side}", "up"]):
            res = dev.exec(*cmd)
            assert res.returncode == 0, res.stderr
    res = dev.exec("sysctl", "-w", "net.ipv4.ip_forward=1")
    assert res.returncode == 0, res.stderr
    return dev, cns, sns


def throughput(f: Farm, seconds: float, period: float) -> tuple[list[float], list[float]]:
    """One TCP flow of `seconds` through the device, its samplers switched on and off
    every `period` s; the flow's 0.25 s intervals wholly inside an "off" or an "on"
    window, as two lists of rates (bit/s). Switching on includes connecting the
    sampler's SSH session and its first sample: the harsher side."""
    dev, cns, sns = forwarding(f)
    ex = SshExecutor(dev.target("router"))
    server = subprocess.Popen(["ip", "netns", "exec", sns, "iperf3", "-s", "-1", "-p", "5301"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        t0 = time.time()
        client = subprocess.Popen(["ip", "netns", "exec", cns, "iperf3", "-c", "192.168.252.2",
                                   "-p", "5301", "-t", f"{seconds:g}", "-i", "0.25", "-J"],
                                  stdout=subprocess.PIPE, text=True)
        windows: list[tuple[float, float, bool]] = []
        k = 0
        while client.poll() is None and time.time() - t0 < seconds:
            start, on = time.time(), k % 2 == 1
            if on:
                smp = Samplers([Target("router", ex, frozenset({"ifaces", "tcp", "qdisc"}))],
                               cpu=False, clock_zero=t0, interval_s=0.1)
                with smp:
                    time.sleep(max(0.0, start + period - time.time()))
                if smp.errors:
                    raise SystemExit(f"sampler failed: {smp.errors}")
            else:
                time.sleep(period)
            windows.append((start - t0, time.time() - t0, on))
            k += 1
        out, _ = client.communicate(timeout=seconds + 30)
        server.wait(10)
    finally:
        for p in (server,):
            if p.poll() is None:
                p.kill()
                p.wait()
        ex.close()
        for ns in (cns, sns):
            subprocess.run(["ip", "netns", "del", ns], check=False, timeout=10)
    off_rates: list[float] = []
    on_rates: list[float] = []
    for iv in json.loads(out)["intervals"]:
        a, b, bps = iv["sum"]["start"], iv["sum"]["end"], iv["sum"]["bits_per_second"]
        for ws, we, on in windows:
            # The first SETTLE_S of a window is left out: switching the sampler on
            # connects its SSH session (once per run in a real run, not once a second).
            if ws + SETTLE_S <= a and b <= we:
                (on_rates if on else off_rates).append(float(bps))
    return off_rates, on_rates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--period", type=float, default=2.0)
    ap.add_argument("--no-throughput", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, farm(Path(tmp)) as f:
        devs = [f.add("openwrt-like" if i % 2 == 0 else "linux-board")
                for i in range(a.devices)]
        facts_of(devs)                                  # untimed warm-up
        par = [facts_of(devs) for _ in range(a.reps)]
        one = [facts_of(devs[:1]) for _ in range(a.reps)]
        rates = None if a.no_throughput else throughput(f, a.seconds, a.period)
    out: dict[str, float] = {
        "devices": a.devices, "parallel_s": statistics.median(par),
        "parallel_max_s": max(par), "one_device_s": statistics.median(one),
        "target_s": TARGET_S}
    if rates is not None:
        without, with_ = (statistics.median(r) for r in rates)
        out.update(without_samplers_bps=without, with_samplers_bps=with_,
                   ratio=with_ / without, target_ratio=TARGET_RATIO)
    if a.json:
        print(json.dumps(out))
        return
    print(f"connect + facts of {a.devices} devices in parallel: median "
          f"{out['parallel_s']:.2f} s, max {out['parallel_max_s']:.2f} s over {a.reps} runs "
          f"(target < {TARGET_S:g} s)")
    print(f"anchor, one device alone:                  median {out['one_device_s']:.2f} s")
    if rates is not None:
        print(f"TCP through the device, samplers off: {out['without_samplers_bps'] / 1e9:.3f} "
              f"Gbit/s; on (10 Hz): {out['with_samplers_bps'] / 1e9:.3f} Gbit/s: "
              f"{100 * out['ratio']:.1f} % (target >= {100 * TARGET_RATIO:g} %; medians of "
              f"{len(rates[0])} and {len(rates[1])} intervals of 0.25 s in one "
              f"{a.seconds:g} s flow, samplers switched every {a.period:g} s)")


if __name__ == "__main__":
    main()
