"""The userspace wire's cost: TCP rate and added latency against a plain veth, one run.

Builds one lab: a - b over an unimpaired wire (emulator = "wire"), a - c over a
plain veth pair, a - d over a wire with a 1 Gbit/s rate behind a FIFO and a - e
over a wire with a 1 Gbit/s rate behind fq_codel (what the discipline costs,
issue 13: >= 0.9 Gbit/s of TCP, so it is not the bottleneck), then alternates,
--reps times each, iperf3 from a to each (--seconds each, cubic), and 200 pings
at 5 ms to each. Prints the median TCP rate and RTT of each; the wire's added
latency is half the RTT difference (a round trip crosses the wire twice).
Run as root: .venv/bin/python bench/wire.py [--seconds 5] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from hoplab.lab import build
from hoplab.nodes import netns
from hoplab.nodes.registry import in_namespace
from hoplab.spec import load_lab

LAB = """# bench: wire against plain veth
name = "benchwire"
[nodes.a]
[nodes.b]
[nodes.c]
[nodes.d]
[nodes.e]
[[links]]
between = ["a", "b"]
emulator = "wire"
[[links]]
between = ["a", "c"]
[[links]]
between = ["a", "d"]
emulator = "wire"
forward = { rate = "1gbit" }
[[links]]
between = ["a", "e"]
forward = { rate = "1gbit", qdisc = "fq_codel" }
"""


def iperf(server_ns: str, client_ns: str, target: str, seconds: float) -> float:
    server = subprocess.Popen(netns.exec_argv(server_ns, ["iperf3", "-s", "-1"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = in_namespace("client", client_ns).run(
            ["iperf3", "-c", target, "-t", str(seconds), "-J", "-C", "cubic"],
            timeout=seconds + 30).stdout
        return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e9
    finally:
        server.wait(10)


def rtt_ms(ns: str, target: str) -> float:
    out = in_namespace("client", ns).run(["ping", "-c", "200", "-i", "0.005", target],
                                         timeout=60).stdout
    return statistics.median(float(x) for x in re.findall(r"time=([\d.]+) ms", out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "benchwire.toml"
        f.write_text(LAB)
        up = build.up(load_lab(f))
    try:
        a, b, c, d, e = (up.plan.node(n) for n in "abcde")
        paths = {"wire": b, "veth": c, "1gbit fifo": d, "1gbit fq_codel": e}
        ips = {n.name: str(n.primary4) for n in paths.values()}
        rate: dict[str, list[float]] = {k: [] for k in paths}
        rtt: dict[str, list[float]] = {k: [] for k in paths}
        for _ in range(args.reps):
            for kind, node in paths.items():
                rate[kind].append(iperf(node.netns, a.netns, ips[node.name], args.seconds))
                rtt[kind].append(rtt_ms(a.netns, ips[node.name]))
    finally:
        build.down("benchwire")
    print(f"{'path':15} {'TCP Gbit/s':>11} {'RTT median us':>14}")
    for kind in rate:
        print(f"{kind:15} {statistics.median(rate[kind]):11.2f} "
              f"{statistics.median(rtt[kind]) * 1e3:14.0f}")
    added = (statistics.median(rtt["wire"]) - statistics.median(rtt["veth"])) / 2 * 1e3
    print(f"wire added latency (one way, median): {added:.0f} us")


if __name__ == "__main__":
    main()
