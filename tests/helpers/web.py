"""Helpers for the dashboard tests: constructed rrul runs as hoplab stores them, a
`hoplab serve` process started and stopped as a user would, and how long a page takes
to paint in headless Chromium (paint(), also bench/render.py's). The fixtures (the served
store, a headless Chromium) are in tests/web/conftest.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hoplab.record import Metric, RunRecord, Series

CHROMIUM = "/usr/bin/chromium"
HOPLAB = str(Path(sys.executable).with_name("hoplab"))
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/")

NASTY = "<script>alert(1)</script>"


def rrul_run(qos: str, rep: int, firmware: str = "v1") -> RunRecord:
    """An rrul run as hoplab stores one: idle 0-5 s, load 5-25 s, idle 25-30 s; 4 flows
    each way, a ping and a probe stream, two cores. qos=on keeps the loaded RTT low."""
    rng = np.random.default_rng(100 * rep + (qos == "on"))
    load_rtt = 4.0 if qos == "on" else 40.0
    flows = [f"rrul.{d}.{i}" for d in ("up", "down") for i in range(1, 5)]
    series = []
    t_load = np.arange(5.2, 25.01, 0.2)
    for name in flows:
        v = rng.normal(20e6, 2e6, len(t_load))
        series.append(Series("throughput", "bit/s", t_load.tolist(), v.tolist(), flow=name))
    t_all = np.arange(0.2, 30.01, 0.2)
    total = np.where((t_all > 5) & (t_all <= 25), 160e6, 0.0) + rng.normal(0, 1e6, len(t_all))
    series.append(Series("throughput", "bit/s", t_all.tolist(), total.tolist()))
    for flow, step in (("rrul.ping", 0.2), ("rrul.probe", 0.02)):
        t = np.arange(0.0, 30.0, step)
        base = np.where((t > 5) & (t < 25), load_rtt, 1.0)
        rtt = np.round(base * rng.uniform(0.8, 1.3, len(t)), 3)
        series.append(Series("rtt", "ms", t.tolist(), rtt.tolist(), flow=flow))
    t_cpu = np.arange(0.1, 30.0, 0.1)
    for core in ("cpu0", "cpu1", "all"):
        busy = np.where((t_cpu > 5) & (t_cpu < 25), 30.0, 2.0)
        for state, share in (("user", 0.2), ("system", 0.3), ("irq", 0.05), ("softirq", 0.45)):
            series.append(Series(f"cpu.{state}", "%", t_cpu.tolist(), (busy * share).tolist(),
                                 node="host", key=core))
        series.append(Series("cpu.idle", "%", t_cpu.tolist(), (100 - busy).tolist(),
                             node="host", key=core))
    jitter = rng.normal(0, 0.02)
    metrics = [Metric("goodput", 160e6 * (1 + jitter), "bit/s"),
               Metric("goodput_up", 80e6 * (1 + jitter), "bit/s"),
               Metric("goodput_down", 80e6 * (1 - jitter), "bit/s"),
               Metric("latency_idle", 1.0 + jitter, "ms"),
               Metric("latency_load", load_rtt * (1.05 + jitter), "ms"),
               Metric("latency_increase", load_rtt * (1.05 + jitter) - 1.0, "ms"),
               *(Metric("goodput", 20e6, "bit/s", flow=f) for f in flows),
               Metric("rtt_median", 1.0 + jitter, "ms", flow="rrul.ping"),
               Metric("cpu.softirq", 13.5, "%", node="host", key="all")]
    phases = [{"name": "idle", "start_s": 0.0, "end_s": 5.0},
              {"name": "load", "start_s": 5.0, "end_s": 25.0},
              {"name": "idle-after", "start_s": 25.0, "end_s": 30.0}]
    meta = {"hoplab_version": "0.1.0", "host": "lab1", "kernel": "6.1.0", "cpus": 2,
            "cpu_model": "test CPU", "tools": {"iperf3": "3.12", "irtt": "0.9.0"},
            "test": {"phases": phases,
                     "flows": [{"name": f, "kind": "tcp", "src": "client", "dst": "server",
                                "start_s": 5.0, "duration_s": 20.0,
                                "direction": f.split(".")[1]} for f in flows]
                     + [{"name": "rrul.ping", "kind": "ping", "src": "client",
                         "dst": "server", "start_s": 0.0, "duration_s": 30.0},
                        {"name": "rrul.probe", "kind": "probe", "src": "client",
                         "dst": "server", "start_s": 0.0, "duration_s": 30.0}]},
            "grade": "A+" if qos == "on" else "A"}
    return RunRecord(experiment="lab-a", test="rrul", kind="rrul", repetition=rep,
                     variant={"qos": qos}, labels={"device": "ap1", "firmware": firmware},
                     started_at=1.7e9 + 100 * rep + (qos == "on") * 50, duration_s=30.0,
                     metadata=meta, metrics=metrics, series=series)


def sample_runs() -> list[tuple[str, RunRecord]]:
    """Four repetitions per side (the fewest for which a rank test can reach p < 0.05),
    and one run with markup in a label, which every page must show as text."""
    runs = [(f"qos={q}", rrul_run(q, rep)) for rep in range(1, 5) for q in ("off", "on")]
    nasty = rrul_run("off", 9, firmware=NASTY)
    nasty.experiment = "other"
    return [*runs, ("nasty", nasty)]


@dataclass
class Served:
    url: str
    ids: dict[str, list[int]]       # which runs the store holds, by role
    proc: subprocess.Popen[bytes]
    first_line: str


def start_server(db: Path | str, *extra: str, timeout: float = 30.0
                 ) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([HOPLAB, "serve", "--db", str(db), "--quiet", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "COLUMNS": "200"})
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        if URL.search(line.decode()):
            return proc, line.decode()
    stop_server(proc)
    raise AssertionError(f"hoplab serve did not start: {line!r}")


@contextmanager
def serving(db: Path, ids: dict[str, list[int]]) -> Iterator[Served]:
    """`hoplab serve` of `db` on a free port of 127.0.0.1, stopped on the way out."""
    proc, line = start_server(db, "--port", "0")
    match = URL.search(line)
    assert match
    try:
        yield Served(f"http://127.0.0.1:{match.group(1)}", ids, proc, line)
    finally:
        stop_server(proc)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@dataclass(frozen=True)
class Paint:
    """How a page loaded in headless Chromium, from the start of its navigation."""

    first_paint_s: float            # first contentful paint: text a reader can read
    load_s: float                   # the load event's end
    first_chart_s: float | None     # a chart in view drawn (None: not waited for)
    errors: tuple[str, ...]         # script errors and requests that left the machine


_PAINTED_AND_LOADED_JS = """() =>
  performance.getEntriesByName('first-contentful-paint').length > 0 &&
  performance.getEntriesByType('navigation').length > 0 &&
  performance.getEntriesByType('navigation')[0].loadEventEnd > 0"""

# A 1280x800 window, as a laptop shows a report.
VIEWPORT = {"width": 1280, "height": 800}


def paint(browser: Any, url: str, *, chart: bool = False) -> Paint:
    """Open `url` (a file:// report, say) in a fresh context with nothing cached: its
    first paint and load, and with `chart`, when the first chart in view was drawn."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        def refuse(route: Any) -> None:
            errors.append(f"request to {route.request.url}")
            route.abort()

        page.route(re.compile(r"^https?://"), refuse)
        page.goto(url, wait_until="load", timeout=120_000)
        # Both are waited for: the first paint may come after the load event (a busy
        # machine's CI run read it missing once), and loadEventEnd is set only once the
        # load event's handlers have returned.
        page.wait_for_function(_PAINTED_AND_LOADED_JS, timeout=120_000)
        times = page.evaluate("""() => [
          performance.getEntriesByName('first-contentful-paint')[0].startTime,
          performance.getEntriesByType('navigation')[0].loadEventEnd]""")
        drawn = None
        if chart:
            page.wait_for_selector(".js-plotly-plot .scatterlayer .trace", timeout=120_000)
            drawn = page.evaluate("performance.now()") / 1000
        return Paint(times[0] / 1000, times[1] / 1000, drawn, tuple(errors))
    finally:
        context.close()
