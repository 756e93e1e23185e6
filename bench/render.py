"""How long reading runs back takes.

A big run: `hoplab show`, `hoplab report` and the dashboard's run page for one run
with 1,000,000 RTT samples, against the targets (show < 1 s, report < 5 s, run page
< 2 s).

A report of many runs: `hoplab report` of eighteen real 3-second profiled runs (each
with its charts and flame graph; tests/data/report_runs), its size and how it loads
in headless Chromium in a 1280x800 window: first paint, the load event, and the
first chart drawn when opened at the first run's section; targets: < 6 MB, first
paint < 2 s. `--db URL --runs SPEC` measures the report of a store of your own.

    .venv/bin/python bench/render.py                    # both, about a minute
    .venv/bin/python bench/render.py --only report      # the report of eighteen runs
    .venv/bin/python bench/render.py --only report --db runs.db --runs 1-18
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.runs import report_store
from tests.helpers.web import paint

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


def big_run_rows(samples: int, reps: int) -> tuple[list[tuple[str, float | None, float]],
                                                      float]:
    rows: list[tuple[str, float | None, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "bench.db")
        with open_store(db) as store:
            rid = store.save_run(big_run(samples))
        show = [timed([HOPLAB, "show", str(rid), "--db", db]) for _ in range(reps)]
        out = os.path.join(tmp, "x.html")
        rep = [timed([HOPLAB, "report", str(rid), "-o", out, "--db", db])
               for _ in range(reps)]
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
    return rows, size


REPORT_MB = 6.0         # targets of issue 19 for the report of eighteen runs
FIRST_PAINT_S = 2.0


def report_rows(db: str | None, spec: str, reps: int) -> tuple[list[tuple[str, float | None,
                                                                          float]], str]:
    """`hoplab report` of a store's runs (default: eighteen real profiled runs) and how the
    file loads in Chromium: medians of `reps` fresh loads."""
    rows: list[tuple[str, float | None, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        if db is None:
            db = os.path.join(tmp, "report.db")
            ids = report_store(Path(db))
            spec = f"{ids[0]}-{ids[-1]}"
        out = os.path.join(tmp, "report.html")
        made = [timed([HOPLAB, "report", spec, "-o", out, "--db", db]) for _ in range(reps)]
        size = os.path.getsize(out) / 1e6
        rows.append(("hoplab report (cli)", statistics.median(made), 10.0))
        if os.path.exists(CHROMIUM):
            from playwright.sync_api import sync_playwright

            first = re.search(r'<h2 id="(run-\d+)">', Path(out).read_text())
            anchor = f"#{first.group(1)}" if first else ""
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=["--no-sandbox", "--disable-background-networking"])
                try:
                    top = [paint(b, f"file://{out}") for _ in range(reps)]
                    at_run = [paint(b, f"file://{out}{anchor}", chart=True) for _ in range(reps)]
                finally:
                    b.close()
            rows += [("first paint in Chromium", statistics.median(p.first_paint_s for p in top),
                      FIRST_PAINT_S),
                     ("load event", statistics.median(p.load_s for p in top), FIRST_PAINT_S),
                     (f"first chart drawn, opened at {anchor or 'the top'}",
                      statistics.median(p.first_chart_s or 0.0 for p in at_run), 5.0)]
        else:
            rows.append(("first paint in Chromium", None, FIRST_PAINT_S))
    verdict = "PASS" if size < REPORT_MB else "MISS"
    return rows, (f"report of {spec} from {db if 'report.db' not in db else 'tests/data'}: "
                  f"{size:.1f} MB, target < {REPORT_MB:g} MB: {verdict}")


def print_rows(rows: list[tuple[str, float | None, float]]) -> None:
    for name, secs, target in rows:
        if secs is None:
            print(f"  {name:45s}    -      (no {CHROMIUM})")
            continue
        verdict = "PASS" if secs < target else "MISS"
        print(f"  {name:45s} {secs:6.2f} s  target < {target:g} s: {verdict}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=("big", "report"), help="one of the two measurements")
    ap.add_argument("--db", help="the report's store (default: eighteen real runs)")
    ap.add_argument("--runs", default="", help="with --db: the runs to report (1-18)")
    args = ap.parse_args()
    if args.db and not args.runs:
        ap.error("--db needs --runs")
    if args.only != "report":
        rows, size = big_run_rows(args.samples, args.reps)
        print(f"one run, {args.samples:,} RTT samples; median of {args.reps} for the CLI; "
              f"report file {size / 1e6:.1f} MB")
        print_rows(rows)
    if args.only != "big":
        rows, head = report_rows(args.db, args.runs, args.reps)
        print(f"{head}; median of {args.reps} fresh loads, 1280x800")
        print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
