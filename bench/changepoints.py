#!/usr/bin/env python3
"""How well does hoplab find change points? A benchmark, not a test.

A generated set of series, each of --values values (versions) with --reps repetitions,
noise with a coefficient of variation of 2, 5 and 10 %, and 0 to 4 steps of known place
and size (5, 10, 15, 25 or 50 %, up or down; at least 10 values apart, as seed 002's
builds were). On the same series in the same run, every detector in hoplab's registry
(hoplab.analysis.detectors, what `hoplab trend --detector NAME` offers), with its
defaults and a minimum segment of 2 values:

  edivisive  hoplab's own, on every repetition (the default)
  pelt       ruptures' PELT (l2 cost) on every repetition, breakpoints on value
             boundaries (jump = repetitions); ruptures has no default penalty, so the
             one its documentation points to, BIC: 2 sigma^2 log(n), sigma from the
             median absolute difference of neighbouring points
  binseg     ruptures' binary segmentation, the same cost, penalty and constraints

and asv.step_detect.detect_steps on each value's median, as asv sees one result per
commit, with its own automatic penalty.

A found change point is a true one if it is within --tolerance values of a step not
matched yet (0: its exact place). Precision, recall and F1 per noise level and overall,
and each detector's time.

  .venv/bin/python bench/changepoints.py                 # 60 series per noise level
  .venv/bin/python bench/changepoints.py --series 200 --tolerance 0
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from hoplab.analysis import detectors
from hoplab.analysis.detectors import MIN_SIZE

SIZES = (5.0, 10.0, 15.0, 25.0, 50.0)
NOISES = (0.02, 0.05, 0.10)
GAP = 10


@dataclass(frozen=True)
class Case:
    noise: float
    values: list[list[float]]
    steps: list[int]                 # index of the first value after each step
    sizes: list[float]


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    seconds: float = 0.0
    found_by_size: dict[float, list[int]] = field(default_factory=dict)

    def add(self, other: Score) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.seconds += other.seconds
        for k, (hit, n) in other.found_by_size.items():
            mine = self.found_by_size.setdefault(k, [0, 0])
            mine[0] += hit
            mine[1] += n

    def figures(self) -> tuple[float, float, float]:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else math.nan
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else math.nan
        f = 2 * p * r / (p + r) if p + r > 0 else math.nan
        return p, r, f


def make_case(rng: np.random.Generator, noise: float, n: int, reps: int) -> Case:
    count = int(rng.integers(0, 5))
    steps: list[int] = []
    while len(steps) < count:
        at = int(rng.integers(GAP, n - GAP + 1))
        if all(abs(at - s) >= GAP for s in steps):
            steps.append(at)
    steps.sort()
    sizes = [float(rng.choice(SIZES)) * float(rng.choice((-1, 1))) for _ in steps]
    level = np.full(n, 100.0)
    for at, pct in zip(steps, sizes, strict=True):
        level[at:] *= 1 + pct / 100
    values = [list(rng.normal(x, x * noise, reps)) for x in level]
    return Case(noise, values, steps, sizes)


def asv(values: list[list[float]]) -> list[int]:
    from asv import step_detect

    steps = step_detect.detect_steps([float(np.median(v)) for v in values])
    return [left for left, *_ in steps[1:]]


def _registered(name: str) -> Callable[[list[list[float]]], list[int]]:
    locate = detectors.get(name).locate
    return lambda values: locate(values, MIN_SIZE)


DETECTORS: dict[str, Callable[[list[list[float]]], list[int]]] = {
    **{name: _registered(name) for name in detectors.names()}, "asv": asv}


def score(case: Case, found: Sequence[int], tolerance: int, seconds: float) -> Score:
    free = dict(zip(case.steps, case.sizes, strict=True))
    out = Score(seconds=seconds)
    for cut in found:
        near = [s for s in free if abs(s - cut) <= tolerance]
        if near:
            del free[min(near, key=lambda s: abs(s - cut))]
            out.tp += 1
        else:
            out.fp += 1
    out.fn = len(free)
    for at, size in zip(case.steps, case.sizes, strict=True):
        entry = out.found_by_size.setdefault(abs(size), [0, 0])
        entry[0] += at not in free
        entry[1] += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=60, help="series per noise level")
    parser.add_argument("--values", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tolerance", type=int, default=1)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    cases = [make_case(rng, noise, args.values, args.reps)
             for noise in NOISES for _ in range(args.series)]
    steps = sum(len(c.steps) for c in cases)
    print(f"{len(cases)} series of {args.values} values x {args.reps} repetitions, "
          f"{steps} steps, tolerance {args.tolerance} value(s), seed {args.seed}")
    totals: dict[str, Score] = {}
    per_noise: dict[tuple[str, float], Score] = {}
    for case in cases:
        for name, detect in DETECTORS.items():
            start = time.perf_counter()
            found = detect(case.values)
            s = score(case, found, args.tolerance, time.perf_counter() - start)
            totals.setdefault(name, Score()).add(s)
            per_noise.setdefault((name, case.noise), Score()).add(s)
    print(f"\n{'detector':<16}{'noise':>7}{'precision':>11}{'recall':>8}{'F1':>7}"
          f"{'false':>7}{'missed':>8}{'time':>9}")
    for name in DETECTORS:
        for noise in (*NOISES, None):
            s = totals[name] if noise is None else per_noise[(name, noise)]
            p, r, f = s.figures()
            shown = "all" if noise is None else f"{noise * 100:.0f} %"
            print(f"{name:<16}{shown:>7}{p:>11.3f}{r:>8.3f}{f:>7.3f}{s.fp:>7}{s.fn:>8}"
                  f"{s.seconds:>8.2f}s")
    print("\nrecall by step size (all noise levels):")
    print(f"{'detector':<16}" + "".join(f"{f'{k:g} %':>8}" for k in SIZES))
    for name in DETECTORS:
        row = totals[name].found_by_size
        print(f"{name:<16}" + "".join(
            f"{row[k][0] / row[k][1]:>8.2f}" if k in row else f"{'-':>8}" for k in SIZES))


if __name__ == "__main__":
    main()
