"""What the samplers cost on this machine: CPU seconds per wall second, and per node-sample.

Builds a generated chain of --nodes namespaces (client, r1.., server), samples every
node for ifaces + qdisc + tcp and the host's CPU at --hz for --seconds on an idle lab,
and prints the process's CPU (getrusage: user + system, every thread) per wall second
and per node-sample, median of --reps. CPU time, unlike a rate, is barely moved by
what else the machine runs, so figures from a busy machine still compare.

Run as root: .venv/bin/python bench/samplers.py [--nodes 5] [--hz 10] [--seconds 10] [--reps 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import sys
import time
from typing import Any

from hoplab.lab import build
from hoplab.samplers import Samplers, Target
from hoplab.spec import load_lab_text


def _cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def _target(node: str, netns: str, kinds: frozenset[str]) -> Target:
    # The executor seam gave Target an executor where it had a namespace's name; the same
    # bench measures both, before and after.
    if "executor" in {f.name for f in dataclasses.fields(Target)}:
        from hoplab.nodes.netns_exec import NetnsExecutor

        where: Any = NetnsExecutor(node, netns)
    else:
        where = netns
    return Target(node, where, kinds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    lab = load_lab_text(f'name = "benchsmp"\n[generate]\nchain = {args.nodes - 2}\n',
                        "bench-samplers.toml")
    up = build.up(lab)
    kinds = frozenset({"ifaces", "qdisc", "tcp"})
    per_s: list[float] = []
    try:
        targets = [_target(n.name, n.netns, kinds) for n in up.plan.nodes]
        for rep in range(args.reps):
            began, used = time.monotonic(), _cpu_s()
            smp = Samplers(targets, cpu=True, clock_zero=time.time(), interval_s=1 / args.hz)
            smp.start()
            time.sleep(args.seconds)
            series = smp.stop()
            cost = (_cpu_s() - used) / (time.monotonic() - began)
            per_s.append(cost)
            if smp.errors:
                raise SystemExit(f"sampler errors: {smp.errors}")
            print(f"rep {rep + 1}: {cost:.4f} CPU s per s, {len(series)} series", flush=True)
    finally:
        build.down(lab.name)
    med = statistics.median(per_s)
    per_sample_ms = 1000 * med / (args.hz * len(up.plan.nodes))
    print(f"\n{len(up.plan.nodes)} nodes x (ifaces, qdisc, tcp) + host cpu at {args.hz:g} Hz, "
          f"median of {args.reps} x {args.seconds:g} s:")
    print(f"  {med:.4f} CPU s per wall s ({100 * med:.1f} % of one core), "
          f"{per_sample_ms:.2f} ms per node-sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
