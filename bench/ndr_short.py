"""What a generator that falls short costs the throughput search, by simulation: the
kind's own search (hoplab.kinds.throughput._search, MLRsearch's phases) against a path
of known capacity, with the generator sending less than asked in each trial by a
shortfall drawn from an exponential distribution (hoplab-gen in a lab falls 0.1 to 1.4 %
short at 22,000 frames/s, the lab's forwarding on its CPU: a mean of about 0.5 %).

    .venv/bin/python bench/ndr_short.py
    .venv/bin/python bench/ndr_short.py --runs 1000 --means 0.3,0.5,1.0

For each mean shortfall it prints the trials a search ran (median, 90th percentile,
most) and its answer's worst distance from the path's, for this search (a short trial
is evidence where it tells something: lossy, a failure at the rate asked; lossless, a
pass at the rate achieved) and for its anchor in the same run: the search as it was
before, every short trial repeated (Search._as_evidence always false).

The path: 64-byte frames through 10 Mbit/s and a queue of 1000 frames, whose no-drop
rate with T-second trials is R / (60 x 8) + (bucket / 60 + Q) / T (docs/kinds.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from hoplab.analysis import ndr
from hoplab.kinds import throughput
from hoplab.lab.shaping import burst_bytes

RATE_BPS, FRAME = 10_000_000, 60
QUEUE = 1000
TRIAL_S, PRECISION = 2.0, 0.005
CEILING = 446_000.0       # hoplab-gen's unpaced rate here


def capacity(seconds: float) -> float:
    return RATE_BPS / (FRAME * 8) + (burst_bytes(RATE_BPS) / FRAME + QUEUE) / seconds


class Generator:
    """A trial: the frames sent fall short of those asked by an exponential shortfall
    (at most 5 %); the path passes `capacity` over the trial and drops the rest."""

    def __init__(self, rng: random.Random, mean: float) -> None:
        self.rng, self.mean = rng, mean

    def trial(self, fps: float, seconds: float, drain_s: float) -> ndr.Trial:
        short = min(0.05, self.rng.expovariate(1 / self.mean)) if self.mean else 0.0
        sent = round(fps * seconds * (1 - short))
        passes = round(capacity(seconds) * seconds)
        return ndr.Trial(fps, sent, min(sent, passes), seconds)


class Before(ndr.Search):
    """The search before short trials were evidence: every one repeated."""

    def _as_evidence(self, trial: ndr.Trial) -> bool:
        return False


def simulate(cls: type[ndr.Search], mean: float, runs: int, seed: int) -> str:
    rng = random.Random(seed)
    opts = throughput.ThroughputOptions(
        frame_sizes=(str(FRAME + 4),), losses_pct=(0.0,), flows=1, trial_s=TRIAL_S,
        precision_pct=100 * PRECISION, drain_s=0.0, latency=False)
    counts: list[int] = []
    errors: list[float] = []
    gave_up = 0
    # The kind's module builds its searches by this name: the anchor's class stands in.
    with mock.patch.object(throughput, "Search", cls):
        for _ in range(runs):
            try:
                search, done, _ = throughput._search(Generator(rng, mean), opts, CEILING)
            except ndr.GeneratorShort:
                gave_up += 1
                continue
            counts.append(len(done))
            errors.append(search.answer(0.0) / capacity(TRIAL_S) - 1)
    deciles = statistics.quantiles(counts, n=10)
    worst = min(errors)
    low = sum(e < -2 * PRECISION for e in errors)
    return (f"trials median {statistics.median(counts):4.1f}  p90 {deciles[-1]:4.1f}  "
            f"most {max(counts):3d}   worst answer {100 * worst:+6.2f} %   "
            f"more than {200 * PRECISION:g} % low {low:3d}   gave up {gave_up}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--means", default="0,0.2,0.5,0.8", help="mean shortfalls, in %%")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--queue", type=int, default=QUEUE, help="frames (1000)")
    a = ap.parse_args()
    globals()["QUEUE"] = a.queue
    print(f"{a.runs} searches each, 64-byte frames, {TRIAL_S:g} s trials, precision "
          f"{100 * PRECISION:g} %, path {capacity(TRIAL_S):.0f} frames/s")
    for mean in (float(m) / 100 for m in a.means.split(",")):
        print(f"mean shortfall {100 * mean:.1f} %")
        print(f"  this search: {simulate(ndr.Search, mean, a.runs, a.seed)}")
        print(f"  anchor:      {simulate(Before, mean, a.runs, a.seed)}")


if __name__ == "__main__":
    main()
