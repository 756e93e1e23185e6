"""What `hoplab run` costs: its TCP rate against bare iperf3 run by hand, in one lab.

Builds examples/router.toml (client - router - server, plain veths, so the CPU
sets the rate and any overhead shows), then alternates, --reps times each:

  bare    iperf3 -s -1 in the server, iperf3 -c in the client, as a user types it;
  hoplab  the same flows through hoplab's test runner, with its samplers on the
          router at 10 Hz (cpu, ifaces, qdisc, tcp) and its 0.2 s reporting.

and prints both medians and their ratio (the target is at least 95 %), and the CPU
hoplab's own process used while its runs went on (getrusage: the samplers, the
data-start watcher, the process bookkeeping; the tools are children and not in
it), in % of one core: the figure a busy machine shifts least.
Run as root: .venv/bin/python bench/overhead.py [--seconds 10] [--flows 1] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hoplab.lab import build
from hoplab.lab.plan import Plan
from hoplab.nodes import netns
from hoplab.run.execute import run_test
from hoplab.spec import load_lab
from hoplab.spec.experiment import Flow, Phase, Samplers, Test

REPO = Path(__file__).resolve().parents[1]


def bare(plan: Plan, seconds: int, flows: int) -> float:
    server_ns, client_ns = plan.node("server").netns, plan.node("client").netns
    target = str(plan.node("server").primary4)
    servers = [subprocess.Popen(netns.exec_argv(server_ns, ["iperf3", "-s", "-1", "-p",
                                                            str(5201 + i)]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for i in range(flows)]
    time.sleep(0.3)
    clients = [subprocess.Popen(netns.exec_argv(client_ns, ["iperf3", "-c", target, "-p",
                                                            str(5201 + i), "-t", str(seconds),
                                                            "-J"]),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
               for i in range(flows)]
    total = 0.0
    for c in clients:
        out, _ = c.communicate(timeout=seconds + 30)
        total += json.loads(out)["end"]["sum_received"]["bits_per_second"]
    for s in servers:
        s.wait(timeout=10)
    return total


def _cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def through_hoplab(plan: Plan, seconds: int, flows: int, workdir: Path,
                   cpu: list[float]) -> float:
    test = Test(name="bulk", kind="tcp", src="client", dst="server",
                flows=tuple(Flow(name=f"bulk.{i + 1}", kind="tcp", src="client", dst="server",
                                 duration_s=float(seconds)) for i in range(flows)),
                phases=(Phase("load", 0.0, float(seconds)),),
                samplers=Samplers(nodes=("router",)))
    began, used = time.monotonic(), _cpu_s()
    result = run_test(test, plan, workdir)
    cpu.append((_cpu_s() - used) / (time.monotonic() - began))
    if result.errors:
        raise SystemExit(f"hoplab run failed: {result.errors}")
    return next(m.value for m in result.metrics if m.name == "goodput" and m.flow is None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--flows", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    lab = load_lab(REPO / "examples" / "router.toml", name="benchovh")
    up = build.up(lab)
    rates: dict[str, list[float]] = {"bare iperf3": [], "hoplab run": []}
    cpu: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.reps):
                # Alternate, so a drift in the machine's speed hits both alike.
                order = ["bare iperf3", "hoplab run"] if rep % 2 == 0 else \
                    ["hoplab run", "bare iperf3"]
                for which in order:
                    rate = bare(up.plan, args.seconds, args.flows) if which == "bare iperf3" \
                        else through_hoplab(up.plan, args.seconds, args.flows, Path(tmp), cpu)
                    rates[which].append(rate)
                    print(f"rep {rep + 1} {which:<12} {rate / 1e9:7.3f} Gbit/s", flush=True)
                    time.sleep(1)
    finally:
        build.down(lab.name)
    med = {k: statistics.median(v) for k, v in rates.items()}
    ratio = med["hoplab run"] / med["bare iperf3"]
    print(f"\n{args.flows} TCP flow(s), {args.seconds} s, median of {args.reps}, "
          f"one-router chain of plain veths:")
    for k, v in med.items():
        print(f"  {k:<12} {v / 1e9:7.3f} Gbit/s   (runs: "
              f"{', '.join(f'{x / 1e9:.3f}' for x in rates[k])})")
    print(f"  hoplab / bare = {100 * ratio:.1f} %  (target >= 95 %)")
    print(f"  hoplab's own process: {100 * statistics.median(cpu):.1f} % of one core "
          f"(runs: {', '.join(f'{100 * c:.1f}' for c in cpu)})")
    return 0 if ratio >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
