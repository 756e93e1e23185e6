"""Folding a large real `perf script` output: hoplab fold (inferno) against FlameGraph.

Records the whole host at a high frequency while iperf3 pushes traffic through
examples/router.toml, until `perf script` gives at least --min-mb megabytes
(default 100), then times:

  hoplab fold FILE                  inferno-collapse-perf, as hoplab runs it;
  perl $STACKCOLLAPSE_PL FILE       FlameGraph's stackcollapse-perf.pl, when the
                                    environment variable names the script;

and compares the samples each counted (stackcollapse-perf.pl also counts a sample
whose stack is empty, under its process name; inferno skips it).
Run as root: .venv/bin/python bench/profile.py [--min-mb 100] [--input FILE] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hoplab.lab import build, netns
from hoplab.profile.record import Recording, script
from hoplab.spec import load_lab

REPO = Path(__file__).resolve().parents[1]
CACHE = Path("/tmp/hoplab-bench-profile.perf-script.txt")


def record(min_mb: float) -> Path:
    lab = load_lab(REPO / "examples" / "router.toml", name="benchprof")
    up = build.up(lab)
    try:
        server, client = up.plan.node("server"), up.plan.node("client")
        seconds = 10
        while True:
            srv = subprocess.Popen(netns.exec_argv(server.netns, ["iperf3", "-s", "-1"]),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
            rec = Recording(Path("/tmp/hoplab-bench-profile.data"), 4999)
            rec.start()
            subprocess.run(netns.exec_argv(client.netns, [
                "iperf3", "-c", str(server.primary4), "-P", "2", "-t", str(seconds)]),
                stdout=subprocess.DEVNULL, check=False)
            rec.stop()
            srv.wait(timeout=10)
            CACHE.write_text(script(rec.data))
            size = CACHE.stat().st_size / 1e6
            print(f"recorded {seconds} s at 4999 Hz: perf script is {size:.0f} MB", flush=True)
            if size >= min_mb:
                return CACHE
            seconds = int(seconds * min_mb / max(size, 1) * 1.2) + 1
    finally:
        build.down(lab.name)


def timed(argv: list[str], reps: int) -> tuple[float, list[float], str]:
    times, out = [], ""
    for _ in range(reps):
        t = time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, out


def samples(folded: str) -> int:
    return sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines() if line.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-mb", type=float, default=100)
    ap.add_argument("--input", help="an existing perf script output")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    src = Path(args.input) if args.input else (
        CACHE if CACHE.exists() and CACHE.stat().st_size / 1e6 >= args.min_mb
        else record(args.min_mb))
    size = src.stat().st_size / 1e6
    hoplab = str(Path(sys.executable).with_name("hoplab"))
    rows = [("hoplab fold (inferno)", [hoplab, "fold", str(src)])]
    pl = os.environ.get("STACKCOLLAPSE_PL")
    if pl:
        rows.append(("stackcollapse-perf.pl", ["perl", pl, str(src)]))
    else:
        print("STACKCOLLAPSE_PL is not set: FlameGraph's script is not measured")
    print(f"\ninput: {src} ({size:.0f} MB), median of {args.reps}")
    counts = {}
    for name, argv in rows:
        med, all_times, out = timed(argv, args.reps)
        counts[name] = samples(out)
        print(f"  {name:<24} {med:7.2f} s  {size / med:7.1f} MB/s  {counts[name]} samples  "
              f"(runs: {', '.join(f'{x:.2f}' for x in all_times)})")
    if len(counts) == 2:
        a, b = counts.values()
        print(f"  samples differ by {abs(a - b)} ({100 * abs(a - b) / max(a, b):.2f} %)")
        if abs(a - b) > 0.01 * max(a, b):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
