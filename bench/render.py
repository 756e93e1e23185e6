"""How long reading a big run back takes: `hoplab show`, `hoplab report` and the
dashboard's run page, for one run with 1,000,000 RTT samples, against the targets
(show < 1 s, report < 5 s, run page < 2 s).

    .venv/bin/python bench/render.py            # about 30 s
    .venv/bin/python bench/render.py --samples 200000 --reps 5
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from hoplab.record import Metric, RunRecord, Series
from hoplab.store import open_store

HOPLAB = str(Path(sys.executable).with_name("hoplab"))
CHROMIUM = "/usr/bin/chromium"


def big_run(samples: int) -> RunRecord:
    rng = np.random.default_rng(0)
    seconds = samples / 1000                       # an RTT sample every millisecond
    t = np.arange(samples) / 1000
    rtt = np.round(rng.gamma(4.0, 0.5, samples) + np.where(t % 60 < 30, 20.0, 1.0), 3)
    series = [Series("rtt", "ms", t.tolist(), rtt.tolist(), flow="big.probe")]
    tt = np.arange(0.2, seconds + 1e-9, 0.2)
    for i in range(1, 5):
        series.append(Series("throughput", "bit/s", tt.tolist(),
                             rng.normal(25e6, 3e6, len(tt)).tolist(), flow=f"big.{i}"))
    series.append(Series("throughput", "bit/s", tt.tolist(), [100e6] * len(tt)))
    tc = np.arange(0.1, seconds + 1e-9, 0.1)
    for core in ("cpu0", "cpu1"):
        for state in ("user", "system", "irq", "softirq", "idle"):
            series.append(Series(f"cpu.{state}", "%", tc.tolist(),
                                 rng.uniform(0, 20, len(tc)).tolist(), node="host", key=core))
    return RunRecord(
        experiment="bench", test="big", kind="probe", repetition=1, variant={}, labels={},
        started_at=time.time(), duration_s=seconds,
        metadata={"test": {"phases": [{"name": "load", "start_s": 0.0, "end_s": seconds}]}},
        metrics=[Metric("rtt_median", float(np.median(rtt)), "ms"),
                 Metric("rtt_p99", float(np.percentile(rtt, 99)), "ms")],
        series=series)


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def fetch(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
    return time.perf_counter() - start


def browser_draw(url: str) -> float | None:
    if not os.path.exists(CHROMIUM):
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-background-networking"])
        try:
            page = b.new_page()
            page.goto(url.rsplit("/run/", 1)[0] + "/static/plotly.min.js")  # cache the bundle
            start = time.perf_counter()
            page.goto(url)
            page.wait_for_selector(".js-plotly-plot .scatterlayer .trace", timeout=60_000)
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 3")
            return time.perf_counter() - start
        finally:
            b.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rows: list[tuple[str, float | None, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "bench.db")
        with open_store(db) as store:
            rid = store.save_run(big_run(args.samples))
        show = [timed([HOPLAB, "show", str(rid), "--db", db]) for _ in range(args.reps)]
        out = os.path.join(tmp, "x.html")
        rep = [timed([HOPLAB, "report", str(rid), "-o", out, "--db", db])
               for _ in range(args.reps)]
        size = os.path.getsize(out)
        rows += [("hoplab show RUN (cli)", statistics.median(show), 1.0),
                 ("hoplab report RUN -o x.html (cli)", statistics.median(rep), 5.0)]
        proc = subprocess.Popen([HOPLAB, "serve", "--db", db, "--port", "0", "--quiet"],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            m = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
            assert m, "hoplab serve did not start"
            base = m.group(0)
            page = fetch(f"{base}/run/{rid}")
            charts = fetch(f"{base}/api/run/{rid}/charts")      # first: not cached yet
            again = fetch(f"{base}/api/run/{rid}/charts")
            rows += [("dashboard GET /run/ID", page, 2.0),
                     ("dashboard GET /api/run/ID/charts (first)", charts, 2.0),
                     ("dashboard GET /api/run/ID/charts (cached)", again, 2.0)]
            proc_restart = browser_draw(f"{base}/run/{rid}")
            rows.append(("run page drawn in Chromium (cached charts)", proc_restart, 2.0))
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
    print(f"one run, {args.samples:,} RTT samples; median of {args.reps} for the CLI; "
          f"report file {size / 1e6:.1f} MB")
    for name, secs, target in rows:
        if secs is None:
            print(f"  {name:45s}    -      (no {CHROMIUM})")
            continue
        verdict = "PASS" if secs < target else "MISS"
        print(f"  {name:45s} {secs:6.2f} s  target < {target:g} s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
