#!/usr/bin/env python3
"""Connecting to 10 devices and collecting their facts, in parallel: the issue's target
is under 2 s. A benchmark, not a test.

Ten emulated devices (tests/helpers/devices.py; half OpenWrt-like with dropbear and
BusyBox, half Linux boards with OpenSSH) are made first, untimed. Then, R times
(default 5), one SshExecutor per device is created in its own thread, connects,
reads the device's uptime and boot id (what every first connection does) and
collects its facts; the wall time from the first thread's start to the last one's
end is one figure. The anchor, printed beside it from the same run: the same
facts of one device alone (so the parallel figure is read against what one costs).

Run as root:  .venv/bin/python bench/devices.py [--devices 10] [--reps 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hoplab.nodes.ssh_exec import SshExecutor
from tests.helpers.devices import Device, farm

TARGET_S = 2.0


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, farm(Path(tmp)) as f:
        devs = [f.add("openwrt-like" if i % 2 == 0 else "linux-board")
                for i in range(a.devices)]
        facts_of(devs)                                  # untimed warm-up
        par = [facts_of(devs) for _ in range(a.reps)]
        one = [facts_of(devs[:1]) for _ in range(a.reps)]
    out = {"devices": a.devices, "parallel_s": statistics.median(par),
           "parallel_max_s": max(par), "one_device_s": statistics.median(one),
           "target_s": TARGET_S}
    if a.json:
        print(json.dumps(out))
        return
    print(f"connect + facts of {a.devices} devices in parallel: median "
          f"{out['parallel_s']:.2f} s, max {out['parallel_max_s']:.2f} s over {a.reps} runs "
          f"(target < {TARGET_S:g} s)")
    print(f"anchor, one device alone:                  median {out['one_device_s']:.2f} s")


if __name__ == "__main__":
    main()
