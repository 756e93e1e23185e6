"""A load on every core, in bursts: each of N processes spins for ON seconds, then sleeps
for OFF, all in step. What docs/testing.md measured the unit tests against (the pool's
worst: both cores busy for 11 s at a stretch), and, under `chrt --idle 0`, what it ran
the pool's tests beside (the idle class, always wanting both cores):

    .venv/bin/python bench/saturate.py --on 11 --off 9 &
    chrt --idle 0 .venv/bin/pytest -q -n 2 tests/unit
    chrt --idle 0 .venv/bin/python bench/saturate.py --on 3600 --off 0.01 &

Stop it with Ctrl-C or SIGTERM (its processes go with it)."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import time


def spin(start: float, on_s: float, off_s: float) -> None:
    period = on_s + off_s
    while True:
        phase = (time.monotonic() - start) % period
        if phase < on_s:
            deadline = time.monotonic() + (on_s - phase)
            while time.monotonic() < deadline:
                pass
        else:
            time.sleep(period - phase)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--on", type=float, required=True, help="seconds busy")
    p.add_argument("--off", type=float, required=True, help="seconds idle")
    p.add_argument("--procs", type=int, default=os.cpu_count() or 2)
    args = p.parse_args()
    start = time.monotonic()
    procs = [multiprocessing.Process(target=spin, args=(start, args.on, args.off), daemon=True)
             for _ in range(args.procs)]
    for proc in procs:
        proc.start()
    signal.signal(signal.SIGTERM, lambda *_: exit(0))
    try:
        for proc in procs:
            proc.join()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
