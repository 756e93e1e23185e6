"""The RPM client's own ceiling: responsiveness on an idle lab (two namespaces, one plain
veth, nothing shaped), where no link is the bottleneck and the figure measures the
client and server. For each --pairs (the client's most probe pairs a second,
rpm_client --max-pairs), --reps runs of the client: the RPM and its confidence, the
probe pairs it launched a second, its CPU time a second, and, with --profile, where that
time went (cProfile, the top functions by their own time).

    .venv/bin/python bench/rpm_client.py                       # 10 and 100 pairs/s
    .venv/bin/python bench/rpm_client.py --pairs 100 --profile # where its time goes

First, one foreign probe after another with no load: the client's CPU time for one.

Needs root (a lab). Runs the client as the kind does (`python -m hoplab.tools.rpm_client`,
direction down, cubic), on the server the kind starts (nginx and hoplab's discard server).
"""

from __future__ import annotations

import argparse
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from hoplab.kinds.responsiveness import figures_of
from hoplab.lab.where import netns_prefix
from hoplab.tools import rpm_client, rpm_server

HOPLAB = str(Path(sys.executable).with_name("hoplab"))
NAME = "rpmbench"
LAB = f"""name = "{NAME}"
[addressing]
ipv6 = false
[nodes.a]
[nodes.b]
[[links]]
between = ["a", "b"]
"""
PORT = 8443
# One foreign probe after another with nothing else running: the client's own CPU time
# for one (its TCP and TLS handshakes, the GET over a new HTTP/2 connection).
PROBE_COST = """
import asyncio, sys, time
import httpx
from hoplab.tools import rpm_client
async def main(url, n):
    async with httpx.AsyncClient(http2=True, verify=False) as c:
        urls = rpm_client.nq_urls((await c.get(url)).json())
    client = rpm_client._Client(rpm_client.Plan(url, 1, "down"), urls)
    rpm_client._emit = lambda doc: None
    await client.foreign_probe()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        await client.foreign_probe()
    print(f"{1000 * (time.process_time() - cpu) / n:.2f} "
          f"{1000 * (time.perf_counter() - wall) / n:.2f} {len(client.foreign) - 1}")
asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def ns(node: str) -> list[str]:
    return ["ip", "netns", "exec", f"{netns_prefix(NAME)}{node}"]


def address(node: str) -> str:
    out = subprocess.run([*ns(node), "ip", "-4", "-o", "addr", "show", "eth0"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()[3].split("/")[0]


def serve(home: Path, host: str) -> subprocess.Popen[bytes]:
    for rel, data in rpm_server.files(home, host, PORT, False).items():
        path = home / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    server = subprocess.Popen(ns("b") + rpm_server.argv(sys.executable, home, PORT, False,
                                                        "cubic"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # a bench: its listen is polled for, not watched
        probe = subprocess.run([*ns("a"), sys.executable, "-c",
                                f"import socket; socket.create_connection(('{host}', {PORT}), 1)"],
                               capture_output=True)
        if probe.returncode == 0:
            return server
        time.sleep(0.1)
    raise SystemExit("the RPM server did not listen")


def one(url: str, pairs: int, seconds: float, profile: Path | None) -> dict[str, float]:
    argv = rpm_client.argv(sys.executable, rpm_client.Plan(url, seconds, "down", "cubic",
                                                           max_pairs=pairs))
    if profile is not None:
        argv = [argv[0], "-m", "cProfile", "-o", str(profile), *argv[1:]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    out = subprocess.run(ns("a") + argv, capture_output=True, text=True).stdout
    took = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = rpm_client.parse(out)
    got = {m.name: m.value for m in figures_of(res, None) if m.key is None}
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rpm": got.get("rpm", 0.0), "confidence": got.get("rpm_confidence", 0.0),
            "foreign_ms": got.get("rpm_foreign_ms", 0.0),
            "self_ms": got.get("rpm_self_ms", 0.0),
            "pairs_s": len(res.foreign) / max(1e-9, sum(i.seconds for i in res.intervals)),
            "cpu_s": cpu / took}


def where(prof: Path) -> None:
    """The last run's own time (cProfile's tottime) by package: what the client spends
    its CPU on."""
    stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    by: dict[str, float] = {}
    for (path, _line, func), (_cc, _nc, tt, _ct, _callers) in stats.items():
        if path == "~":
            part = f"built-in {func.split(' of ')[0].strip('<>{}')}"
        else:
            parts = Path(path).parts
            pkg = next((p for p in ("h2", "hpack", "httpcore", "httpx", "anyio", "hoplab",
                                    "asyncio", "ssl.py", "importlib") if p in parts
                        or p in path), "other")
            part = pkg
        by[part] = by.get(part, 0.0) + tt
    total = sum(by.values())
    for part, tt in sorted(by.items(), key=lambda x: -x[1])[:12]:
        print(f"    {part:48} {tt:6.2f} s  {100 * tt / total:5.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "lab.toml").write_text(LAB)
        subprocess.run([HOPLAB, "lab", "up", str(Path(tmp) / "lab.toml")], check=True,
                       capture_output=True)
        server = None
        try:
            host = address("b")
            server = serve(Path(tmp) / "home", host)
            url = f"https://{host}:{PORT}{rpm_server.WELL_KNOWN}"
            cost = subprocess.run([*ns("a"), sys.executable, "-c", PROBE_COST, url, "200"],
                                  capture_output=True, text=True, check=True).stdout.split()
            print(f"one foreign probe alone: {cost[0]} ms of the client's CPU, {cost[1]} ms "
                  f"(200 in a row, {cost[2]} answered)")
            print("pairs/s asked  launched   RPM (runs)                 conf  foreign ms"
                  "  self ms  client CPU s/s")
            for pairs in args.pairs:
                prof = Path(tmp) / f"client-{pairs}.prof" if args.profile else None
                runs = [one(url, pairs, args.seconds, prof) for _ in range(args.reps)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                rpms = " ".join(f"{r['rpm']:,.0f}" for r in runs)
                print(f"{pairs:13d}  {med['pairs_s']:8.1f}   {rpms:26} "
                      f"{min(r['confidence'] for r in runs):4.0f}  {med['foreign_ms']:10.1f}"
                      f"  {med['self_ms']:7.0f}  {med['cpu_s']:14.2f}", flush=True)
                if prof is not None:
                    where(prof)
        finally:
            if server is not None:
                server.terminate()
                server.wait()
            subprocess.run([HOPLAB, "lab", "down", NAME], capture_output=True)


if __name__ == "__main__":
    main()
