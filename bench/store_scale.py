#!/usr/bin/env python3
"""A team's history: 100,000 runs in SQLite and in PostgreSQL, and how fast they answer.

Fills each store with N runs (default 100,000): one experiment `nat` of V
versions (label `version`, default 1,000) x R repetitions (default 3), which
`hoplab trend` reads, and the rest spread over 40 other experiments with
labels device (8 values), firmware (60) and commit (one per 4 runs), a variant
`hops` (1-4), and the whole-run and per-flow metrics a TCP test stores (27 per
run). Series and raw outputs are left out: no query timed here reads them.

Then times, through the CLI as a user types them (the median of 3 calls, each a
new process; the anchor is `hoplab --version`, the cost of starting at all):

  hoplab runs --filter experiment=nat --limit 20       target < 1 s
  hoplab runs --filter version=v0500 --limit 20         (a label: JSON, not a column)
  hoplab runs --filter device=board-3 --limit 20
  hoplab runs --limit 20
  the dashboard's home (what changed), the first after start and judged   target < 1 s
  the dashboard's run list, page 1, page 200 and filtered    target < 1 s per request
  the home after a run is added to a short series, and to the 3,000-run series
  hoplab trend goodput --by version --filter experiment=nat    target < 2 s

  .venv/bin/python bench/store_scale.py                    # both stores, 100,000 runs
  .venv/bin/python bench/store_scale.py --runs 20000 --backends sqlite

PostgreSQL is a throwaway server from the Debian binaries (tests/helpers/postgres.py).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hoplab.store import open_store  # noqa: E402
from hoplab.store.labels import label_rows  # noqa: E402
from hoplab.store.schema import TABLES  # noqa: E402
from tests.helpers.postgres import running  # noqa: E402

HOPLAB = str(Path(sys.executable).parent / "hoplab")
BATCH = 2000
WHOLE = ("goodput", "sent_rate", "throughput_mean", "throughput_median", "throughput_p5",
         "throughput_p95", "retransmits", "rtt_median", "rtt_p99", "rtt_min", "rtt_jitter")
PER_FLOW = ("goodput", "throughput_mean", "throughput_p5", "retransmits", "sent_rate",
            "bytes_received", "rtt_median", "spikes")
URL = re.compile(r"http://[0-9.]+:(\d+)")


Row = dict[str, Any]


def _runs(n: int, values: int, reps: int, seed: int = 7) -> Iterator[tuple[Row, list[Row]]]:
    rng = random.Random(seed)
    trend_runs = values * reps
    # The nat runs are spread through the history, as a team's would be.
    every = max(1, n // trend_runs)
    k = 0
    for i in range(1, n + 1):
        t0 = 1.6e9 + i * 600.0
        if k < trend_runs and i % every == 0:
            version = k // reps
            k += 1
            experiment, test = "nat", "tcp-nat"
            labels = {"version": f"v{version:04d}", "device": "wrt3200"}
            variant: dict[str, object] = {}
            # Steps at known versions, so the trend has something to find.
            level = 600e6 * (1.25 if version >= 300 else 1.0) * (0.85 if version >= 700 else 1.0)
            goodput = level * rng.gauss(1.0, 0.05)
        else:
            e = rng.randrange(40)
            experiment, test = f"exp{e:02d}", rng.choice(("tcp-up", "rrul", "udp-flood"))
            labels = {"device": f"board-{rng.randrange(8)}",
                      "firmware": f"fw{rng.randrange(60):02d}",
                      "commit": f"{(i // 4) * 2654435761 % 2**40:010x}"}
            variant = {"hops": 1 + rng.randrange(4)}
            goodput = rng.uniform(50e6, 900e6)
        row = {"id": i, "experiment": experiment, "experiment_id": f"x{i // 12}", "test": test,
               "kind": "tcp", "repetition": 1 + (i % 3), "status": "ok", "error": None,
               "started_at": t0, "duration_s": 10.0, "seed": 1, "run_order": i % 12,
               "measurement_version": 2, "hoplab_version": "0.2.0", "variant": variant,
               "labels": labels, "metadata": {"hoplab_version": "0.2.0", "host": "lab1"}}
        metrics = []
        for seq, name in enumerate(WHOLE):
            value = goodput if name == "goodput" else rng.uniform(0, 1e3)
            metrics.append({"run_id": i, "seq": seq, "name": name, "flow": None, "node": None,
                            "key": None, "value": value, "unit": "bit/s"})
        for f in range(2):
            for name in PER_FLOW:
                metrics.append({"run_id": i, "seq": len(metrics), "name": name,
                                "flow": f"flow{f}", "node": None, "key": None,
                                "value": rng.uniform(0, 1e3), "unit": "bit/s"})
        yield row, metrics


def fill(url: str, n: int, values: int, reps: int) -> float:
    """Bulk insert straight into the store's tables, as save_run fills them (one at a
    time it would take most of an hour for 100,000 runs); returns the seconds it took."""
    t0 = time.monotonic()
    store = open_store(url)
    engine = store._engine
    rows: list[Row] = []
    metrics: list[Row] = []
    labels: list[Row] = []
    label_table = TABLES.run_labels
    assert label_table is not None

    def flush(conn: sa.Connection) -> None:
        if rows:
            conn.execute(TABLES.runs.insert(), rows)
            conn.execute(TABLES.metrics.insert(), metrics)
            conn.execute(label_table.insert(), labels)
            rows.clear()
            metrics.clear()
            labels.clear()

    with engine.begin() as conn:
        for row, ms in _runs(n, values, reps):
            rows.append(row)
            metrics += ms
            labels += label_rows(row["id"], row["labels"], row["variant"])
            if len(rows) >= BATCH:
                flush(conn)
        flush(conn)
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SELECT setval('runs_id_seq', (SELECT max(id) FROM runs))")
            conn.exec_driver_sql("ANALYZE")
    store.close()
    return time.monotonic() - t0


def _cli(args: Sequence[str], code: int = 0) -> float:
    """Seconds `hoplab ARGS` takes, which must exit `code`."""
    t0 = time.monotonic()
    proc = subprocess.run([HOPLAB, *args], capture_output=True, text=True, check=False)
    took = time.monotonic() - t0
    if proc.returncode != code:
        raise SystemExit(f"hoplab {' '.join(args)} failed: {proc.stderr.strip()[-500:]}")
    return took


def _median(f: Callable[[], float], times: int = 3) -> float:
    return float(statistics.median(f() for _ in range(times)))


@contextmanager
def serving(url: str) -> Iterator[str]:
    proc = subprocess.Popen([HOPLAB, "serve", "--db", url, "--port", "0", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    try:
        for _ in range(50):
            line = proc.stdout.readline().decode()
            m = URL.search(line)
            if m:
                yield f"http://127.0.0.1:{m.group(1)}"
                return
        raise SystemExit(f"hoplab serve did not start: {line}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _get(url: str) -> float:
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=30) as resp:
        resp.read()
        if resp.status != 200:
            raise SystemExit(f"GET {url}: {resp.status}")
    return time.monotonic() - t0


def _home(base: str, after: int | None = None) -> float:
    """Seconds until GET / answers what changed (with the run `after` judged): the
    page says it is still judging ("id=\"pending\"") and reloads itself until then."""
    t0 = time.monotonic()
    while True:
        with urllib.request.urlopen(base + "/", timeout=60) as resp:
            text = resp.read().decode()
        judged = re.search(r"up to run (\d+)\)", text)
        if 'id="pending"' not in text and (after is None or (
                judged is not None and int(judged.group(1)) >= after)):
            return time.monotonic() - t0
        if time.monotonic() - t0 > 300:
            raise SystemExit("the home did not answer in 300 s")


def _added(url: str, experiment: str, labels: dict[str, str]) -> int:
    """One more finished run in the store, as `hoplab run` would save it."""
    from hoplab.record import Metric, RunRecord

    with open_store(url) as store:
        return store.save_run(RunRecord(
            experiment=experiment, test="tcp-nat" if experiment == "nat" else "tcp-up",
            kind="tcp", repetition=1, variant={} if experiment == "nat" else {"hops": 1},
            labels=labels, started_at=time.time(), duration_s=10.0,
            metadata={"hoplab_version": "0.2.0"}, metrics=[Metric("goodput", 5e8, "bit/s")]))


def measure(url: str, has_trend: bool) -> list[tuple[str, float, float]]:
    store = ["--db", url]
    out = [("hoplab --version (the anchor)", _median(lambda: _cli(["--version"])), 0.0)]
    for what, args in (
        ("runs --filter experiment=nat --limit 20", ["--filter", "experiment=nat"]),
        ("runs --filter version=v0500 --limit 20", ["--filter", "version=v0500"]),
        ("runs --filter device=board-3 --limit 20", ["--filter", "device=board-3"]),
        # A filter that matches no run is an error naming the values there are (exit 2).
        ("runs --filter version=v9999 --limit 20 (none: exit 2)", ["--filter", "version=v9999"]),
        ("runs --limit 20", []),
    ):
        code = 2 if "v9999" in what else 0
        out.append((what, _median(partial(_cli, ["runs", *store, *args, "--limit", "20"],
                                          code)), 1.0))
    with serving(url) as base:
        # The home judges every series once (from the server's start, in a thread of its
        # own), then keeps the answer until a run is added: the first GET / waits for it.
        out.append(("dashboard home (what changed), the first after start", _home(base), 0.0))
        for what, path in (("dashboard home (what changed), judged", "/"),
                           ("dashboard run list, page 1", "/runs"),
                           ("dashboard run list, page 200", "/runs?page=200"),
                           ("dashboard run list, device=board-3", "/runs?device=board-3"),
                           ("dashboard run list, version=v0999", "/runs?version=v0999")):
            out.append((what, _median(partial(_get, base + path)), 1.0))
        # A run added: only its series is judged again.
        for what, experiment, labels in (
                ("a short series", "exp00", {"device": "board-1"}),
                ("the 3,000-run nat series", "nat", {"version": "v9999", "device": "wrt3200"})):
            took = _home(base, after=_added(url, experiment, labels))
            out.append((f"dashboard home, the first after a run is added to {what}", took, 0.0))
    if has_trend:
        args = ["trend", "goodput", "--by", "version", "--filter", "experiment=nat", *store]
        out.append(("trend goodput --by version (1,000 x 3)", _median(lambda: _cli(args)), 2.0))
        out.append(("trend ... --json", _median(lambda: _cli([*args, "--json"])), 2.0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--values", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backends", default="sqlite,postgresql")
    args = ap.parse_args()
    has_trend = subprocess.run([HOPLAB, "trend", "--help"], capture_output=True,
                               check=False).returncode == 0
    results: dict[str, list[tuple[str, float, float]]] = {}
    for backend in args.backends.split(","):
        if backend == "sqlite":
            with tempfile.TemporaryDirectory(prefix="hoplab-scale-") as tmp:
                url = str(Path(tmp) / "runs.db")
                took = fill(url, args.runs, args.values, args.reps)
                print(f"sqlite: {args.runs:,} runs filled in {took:.0f} s", flush=True)
                results[backend] = measure(url, has_trend)
        else:
            with running(shared_buffers="256MB") as server:
                took = fill(server.url, args.runs, args.values, args.reps)
                print(f"postgresql: {args.runs:,} runs filled in {took:.0f} s", flush=True)
                results[backend] = measure(server.url, has_trend)
    names = [w for w, _, _ in next(iter(results.values()))]
    width = max(len(n) for n in names)
    print(f"\n{'seconds, median of 3':<{width}}  " + "  ".join(f"{b:>10}" for b in results)
          + "  target")
    failed = False
    for i, name in enumerate(names):
        cells = []
        target = next(iter(results.values()))[i][2]
        for rows in results.values():
            took = rows[i][1]
            miss = bool(target) and took > target
            failed |= miss
            cells.append(f"{took:>9.3f}{'!' if miss else ' '}")
        print(f"{name:<{width}}  " + "  ".join(cells) + (f"  < {target:g}" if target else ""))
    if not has_trend:
        print("hoplab trend is not installed: not measured")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
