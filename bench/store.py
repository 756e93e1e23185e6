#!/usr/bin/env python3
"""How fast does the store save and load a run with a million samples? A benchmark, not a test.

One run with one RTT series of N samples (default 1,000,000: 1000 s of irtt at
1 ms), times on a 1 ms grid, RTTs in ms rounded to the microsecond as the tools
print them, plus the same with full-precision (incompressible) values as the
worst case. For each store: save_run and get_run times (median of R
repetitions) and the bytes the series take. Then the codec alone: the layout
and compression the store uses against the alternatives it was chosen over.

  .venv/bin/python bench/store.py                       # SQLite in a temp dir
  .venv/bin/python bench/store.py --pg postgresql://postgres@127.0.0.1:5432/bench
  .venv/bin/python bench/store.py --samples 100000 --reps 5

The PostgreSQL database must exist; the benchmark adds runs to it.
"""

from __future__ import annotations

import argparse
import lzma
import random
import statistics
import tempfile
import time
import zlib
from array import array
from collections.abc import Callable
from functools import partial
from pathlib import Path

from hoplab.record import RunRecord, Series
from hoplab.store import open_store
from hoplab.store.codec import decode_floats, encode_floats


def make_run(n: int, *, rounded: bool) -> RunRecord:
    rng = random.Random(42)
    t = [i * 0.001 for i in range(n)]
    v = [rng.gauss(20.0, 2.0) for _ in range(n)]
    if rounded:
        v = [round(x, 3) for x in v]
    return RunRecord(experiment="bench", test="rtt", kind="probe", repetition=1,
                     variant={"hops": 2}, labels={}, started_at=time.time(),
                     duration_s=n * 0.001, series=[Series("rtt", "ms", t, v, flow="f1")])


def timed(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_store(url: str, run: RunRecord, reps: int, label: str) -> None:
    with open_store(url) as store:
        ids: list[int] = []
        save = timed(lambda: ids.append(store.save_run(run)), reps)
        load = timed(lambda: store.get_run(ids[-1]), reps)
        back = store.get_run(ids[-1])
        assert back.series == run.series, "series did not load back exactly"
        light = timed(lambda: store.get_run(ids[-1], series=False), reps)
        print(f"  {store.describe():<45} {label:<10} save {save * 1000:7.1f} ms   "
              f"get_run {load * 1000:7.1f} ms   (series=False {light * 1000:5.1f} ms)")


def _plain(compress: Callable[[bytes], bytes]) -> Callable[[list[float]], bytes]:
    return lambda values: compress(array("d", values).tobytes())


def _unplain(decompress: Callable[[bytes], bytes]) -> Callable[[bytes, int], list[float]]:
    def decode(blob: bytes, _n: int) -> list[float]:
        arr = array("d")
        arr.frombytes(decompress(blob))
        return arr.tolist()
    return decode


# Every codec timed from list[float] to blob and back, as the store uses it.
CODECS: list[tuple[str, Callable[[list[float]], bytes], Callable[[bytes, int], list[float]]]] = [
    ("store codec", encode_floats, decode_floats),
    ("zlib 6, plain", _plain(lambda b: zlib.compress(b, 6)), _unplain(zlib.decompress)),
    ("lzma preset 0, plain", _plain(lambda b: lzma.compress(b, preset=0)),
     _unplain(lzma.decompress)),
]


def bench_codec(run: RunRecord, label: str) -> None:
    s = run.series[0]
    print(f"  {label}: {len(s.t):,} samples, {8 * len(s.t) / 1e6:.1f} MB per array raw")
    for name, values in (("t", s.t), ("v", s.v)):
        for codec, encode, decode in CODECS:
            blob = encode(values)
            enc = timed(partial(encode, values), 3)
            dec = timed(partial(decode, blob, len(values)), 3)
            if codec == "store codec":
                codec += " (shuffled)" if blob[0] == 2 else " (plain)"
            print(f"    {name}  {codec:<24} {len(blob) / (8 * len(values)):6.1%}  "
                  f"encode {enc * 1000:6.1f} ms  decode {dec * 1000:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", metavar="URL", help="also measure this PostgreSQL database")
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()

    runs = {"rounded": make_run(args.samples, rounded=True),
            "full": make_run(args.samples, rounded=False)}
    print(f"store: one series of {args.samples:,} samples, median of {args.reps}")
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "bench.db")
        for label, run in runs.items():
            bench_store(url, run, args.reps, label)
        if args.pg:
            for label, run in runs.items():
                bench_store(args.pg, run, args.reps, label)
    print("codec:")
    for label, run in runs.items():
        bench_codec(run, label)


if __name__ == "__main__":
    main()
