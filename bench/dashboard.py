#!/usr/bin/env python3
"""The dashboard's web stack: hoplab serve (uvicorn + Starlette) against the standard
library's ThreadingHTTPServer it replaced (bench/stdlib_dashboard.py), both answering
with the same pages (web/app.py) over the same store, measured in the same run.

For each server, started as a process over a store of N runs (bench/store_scale.py
fills it; default 100,000):

  requests/s   (and the server process's CPU per request, steadier on a shared machine)
               the run list (/runs, 200 runs with their figures) and a small JSON answer
               (/api/runs?limit=1), --clients at once for --seconds, in --rounds turns, a new
               connection per request (the stdlib server speaks HTTP/1.0)
  memory       the server's RSS when idle after one request, and its peak (VmHWM)
  slow clients 50 connections each sending a request head one header line every 8 s;
               meanwhile a plain GET /runs every second: its status and time, and how long
               the server keeps the slow connections (target: 200 within 1 s, memory
               under 300 MB)

  .venv/bin/python bench/dashboard.py                        # 100,000 runs
  .venv/bin/python bench/dashboard.py --runs 20000 --seconds 5

With --home-history, instead: the home's load time (GET / on a `hoplab serve` just
started, which judges every series unless the store keeps their judgements, then
once more) on the 60-version history store of the version tests
(tests/helpers/versions.py), before and after the store keeps each series' judged
changes (analysis/changes.py keep_judged: what `hoplab run`, `import` and `migrate` do).

  .venv/bin/python bench/dashboard.py --home-history --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from store_scale import fill  # noqa: E402

HOPLAB = str(Path(sys.executable).parent / "hoplab")
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/")
SERVERS = {
    "stdlib": [sys.executable, str(ROOT / "bench" / "stdlib_dashboard.py")],
    "uvicorn": [HOPLAB, "serve"],
}
SLOW_CLIENTS = 50
SLOW_EVERY_S = 8.0
SLOW_FOR_S = 40.0


@contextmanager
def started(argv: Sequence[str], db: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    proc = subprocess.Popen([*argv, "--db", db, "--port", "0", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline().decode()
        m = URL.search(line)
        if not m:
            raise SystemExit(f"{argv} did not start: {line!r}")
        yield int(m.group(1)), proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()


def status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


async def get(port: int, path: str, timeout: float = 60.0) -> tuple[int, float]:
    """One GET on a new connection: its status (0: closed without an answer) and seconds."""
    t0 = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                         "Connection: close\r\n\r\n".encode())
            data = await reader.read()
            writer.close()
    except (OSError, TimeoutError):
        return 0, time.monotonic() - t0
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, time.monotonic() - t0


async def load(port: int, path: str, clients: int, seconds: float) -> tuple[float, Counter[int]]:
    """Requests answered 200 per second, with every status seen."""
    end = time.monotonic() + seconds
    seen: Counter[int] = Counter()

    async def client() -> None:
        while time.monotonic() < end:
            status, _ = await get(port, path)
            seen[status] += 1

    t0 = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    return seen[200] / (time.monotonic() - t0), seen


@dataclass
class Slow:
    probes: list[tuple[float, int, float]] = field(default_factory=list)  # at, status, s
    dropped_after: list[float] = field(default_factory=list)
    peak_rss_kb: int = 0
    peak_threads: int = 0


async def slow_clients(port: int, pid: int) -> Slow:
    """SLOW_CLIENTS connections trickling a request head; a probe GET /runs each second."""
    out = Slow()
    t0 = time.monotonic()

    async def trickle(i: int) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET /?slow={i} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
            n = 0
            while time.monotonic() - t0 < SLOW_FOR_S:
                try:
                    data = await asyncio.wait_for(reader.read(65536), SLOW_EVERY_S)
                    if not data:
                        break               # the server closed it
                except TimeoutError:
                    writer.write(f"X-Slow-{n}: {'x' * 20}\r\n".encode())
                    await writer.drain()
                    n += 1
            out.dropped_after.append(time.monotonic() - t0)
            writer.close()
        except OSError:
            out.dropped_after.append(time.monotonic() - t0)

    async def probe() -> None:
        await asyncio.sleep(1.0)            # every slow client has connected and begun
        while time.monotonic() - t0 < SLOW_FOR_S - 2:
            status, took = await get(port, "/runs", timeout=SLOW_FOR_S)
            out.probes.append((time.monotonic() - t0, status, took))
            out.peak_rss_kb = max(out.peak_rss_kb, status_kb(pid, "VmRSS"))
            out.peak_threads = max(out.peak_threads, status_kb(pid, "Threads"))
            await asyncio.sleep(max(0.0, 1.0 - took))

    await asyncio.gather(probe(), *(trickle(i) for i in range(SLOW_CLIENTS)))
    return out


def cpu_s(pid: int) -> float:
    """The process's user + system CPU time so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PATHS = (("run list (/runs)", "/runs"), ("/api/runs?limit=1", "/api/runs?limit=1"))


def throughput(servers: dict[str, tuple[int, subprocess.Popen[bytes]]], clients: int,
               seconds: float, rounds: int) -> dict[str, dict[str, str]]:
    """Requests/s and the server's CPU per request, the servers taking turns for `rounds`
    rounds (a machine shared with others drifts; turns spread the drift over both);
    medians of the rounds."""
    got: dict[tuple[str, str], list[tuple[float, float, Counter[int]]]] = {}
    for _ in range(rounds):
        for name, (port, proc) in servers.items():
            for label, path in PATHS:
                c0 = cpu_s(proc.pid)
                rps, seen = asyncio.run(load(port, path, clients, seconds))
                per = (cpu_s(proc.pid) - c0) / max(1, sum(seen.values()))
                got.setdefault((name, label), []).append((rps, per, seen))
    out: dict[str, dict[str, str]] = {name: {} for name in servers}
    for (name, label), runs in got.items():
        other: Counter[int] = Counter()
        for _, _, seen in runs:
            other.update({s: n for s, n in seen.items() if s != 200})
        out[name][f"{label}, req/s"] = (f"{statistics.median(r for r, _, _ in runs):.1f}"
                                        + (f" ({dict(other)})" if other else ""))
        out[name][f"{label}, server CPU ms/req"] = (
            f"{statistics.median(p for _, p, _ in runs) * 1000:.2f}")
    return out


def slow_row(proc: subprocess.Popen[bytes], port: int) -> dict[str, str]:
    slow = asyncio.run(slow_clients(port, proc.pid))
    ok = [took for _, status, took in slow.probes if status == 200]
    bad = Counter(status for _, status, _ in slow.probes if status != 200)
    worst = max(slow.probes, key=lambda p: p[2]) if slow.probes else None
    return {
        "slow: GET /runs answered 200": f"{len(ok)} of {len(slow.probes)}" + (
            f" ({dict(bad)})" if bad else ""),
        "slow: GET /runs median, s": f"{statistics.median(ok):.3f}" if ok else "-",
        "slow: GET /runs worst, s (at)": f"{worst[2]:.3f} ({worst[0]:.0f} s)" if worst else "-",
        "slow: RSS peak, MB": f"{slow.peak_rss_kb / 1024:.0f}",
        "slow: threads peak": str(slow.peak_threads),
        "slow: connections held, s (median)": f"{statistics.median(slow.dropped_after):.1f}",
    }


def first_home(db: str) -> tuple[float, float]:
    """Seconds of the first GET / of a server just started, and of the second."""
    with started(SERVERS["uvicorn"], db) as (port, _):
        first = asyncio.run(get(port, "/"))
        second = asyncio.run(get(port, "/"))
    assert first[0] == second[0] == 200, (first, second)
    return first[1], second[1]


def home_history(rounds: int) -> None:
    from hoplab.analysis.changes import keep_judged
    from hoplab.kinds import HEADLINES
    from hoplab.store import open_store
    from tests.helpers.versions import history_store

    with tempfile.TemporaryDirectory(prefix="hoplab-home-") as tmp:
        db = str(Path(tmp) / "runs.db")
        history_store(Path(db))
        rows = {}
        rows["judged by the server"] = [(*first_home(db), in_process(db))
                                        for _ in range(rounds)]
        with open_store(db) as store:
            t0 = time.monotonic()
            keep_judged(store, HEADLINES)
            kept_s = time.monotonic() - t0
        rows["kept in the store"] = [(*first_home(db), in_process(db)) for _ in range(rounds)]
    print(f"60 versions x 3 runs; keeping the judgements took {kept_s:.2f} s; "
          f"median of {rounds} server starts")
    print(f"{'':<22}  {'first GET /, s':>14}  {'second GET /, s':>15}  "
          f"{'a fresh index, s':>16}")
    for name, times in rows.items():
        print(f"{name:<22}  {statistics.median(t[0] for t in times):>14.3f}  "
              f"{statistics.median(t[1] for t in times):>15.3f}  "
              f"{statistics.median(t[2] for t in times):>16.3f}")


def in_process(db: str) -> float:
    """Seconds a fresh ChangeIndex takes to answer (what a server starting does first,
    without the server's start-up around it)."""
    from hoplab.analysis.changes import ChangeIndex
    from hoplab.kinds import HEADLINES
    from hoplab.store import open_store

    with open_store(db, read_only=True) as store:
        t0 = time.monotonic()
        ChangeIndex(HEADLINES).refresh(store)
        return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    ap.add_argument("--seconds", type=float, default=5.0, help="per load (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="turns per server (default 3)")
    ap.add_argument("--servers", default="stdlib,uvicorn")
    ap.add_argument("--home-history", action="store_true",
                    help="measure the home's load time on the 60-version history instead")
    args = ap.parse_args()
    if args.home_history:
        home_history(args.rounds)
        return 0
    names = args.servers.split(",")
    results: dict[str, dict[str, str]] = {name: {} for name in names}
    with tempfile.TemporaryDirectory(prefix="hoplab-dash-") as tmp, ExitStack() as stack:
        db = str(Path(tmp) / "runs.db")
        took = fill(db, args.runs, 1000, 3)
        print(f"store: {args.runs:,} runs filled in {took:.0f} s", flush=True)
        servers = {name: stack.enter_context(started(SERVERS[name], db)) for name in names}
        for name, (port, proc) in servers.items():
            asyncio.run(get(port, "/runs"))  # the store opened, the page's imports loaded
            results[name]["RSS after one request, MB"] = (
                f"{status_kb(proc.pid, 'VmRSS') / 1024:.0f}")
        for name, row in throughput(servers, args.clients, args.seconds,
                                    args.rounds).items():
            results[name].update(row)
        for name, (_, proc) in servers.items():
            results[name]["RSS peak under load, MB"] = (
                f"{status_kb(proc.pid, 'VmHWM') / 1024:.0f}")
        for name, (port, proc) in servers.items():
            results[name].update(slow_row(proc, port))
            print(f"{name}: slow clients measured", flush=True)
    names = list(results[names[0]])
    width = max(len(n) for n in names)
    print(f"\n{'':<{width}}  " + "  ".join(f"{s:>22}" for s in results))
    for n in names:
        print(f"{n:<{width}}  " + "  ".join(f"{r[n]:>22}" for r in results.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
