"""hoplab-wire's fq_codel beside a Linux kernel's own (docs/wire.md): the same load
through the same path, h1 - r1 - h2 with r1 -> h2 shaped to 20 Mbit/s with fq_codel.

- wire:  r1 a namespace; the r1 - h2 link's forward direction is hoplab-wire's
         rate limiter and fq_codel (this machine's kernel has no fq_codel).
- guest: r1 a QEMU VM booting Debian's 6.12 kernel; the same direction is the guest
         kernel's HTB at 20 Mbit/s with its fq_codel leaf (docs/vm.md).

Load: three cubic uploads h1 -> h2 (iperf3, 12 s) with a ping from h1 every 100 ms;
goodput over the last 10 s, and the ping's median and p99 RTT from 2 s into the load
(the idle RTT first, 3 s of pings). Prints one table with both.

Run as root: .venv/bin/python bench/wire_vs_guest.py [--reps 3] [--only wire|guest]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hoplab.lab import build
from hoplab.spec import load_lab

KERNEL = "debian:6.12.100+deb12-amd64"
PORTS = (5301, 5302, 5303)
LOAD_S, WARM_S = 12, 2
PAYLOAD_MBIT = 20 * 1448 / 1514
_PING = re.compile(r"^\[(\d+\.\d+)\].*time=([\d.]+) ms", re.M)

LABS = {
    "wire": """
name = "bwire"
[nodes.h1]
[nodes.r1]
[nodes.h2]
[[links]]
between = ["h1", "r1"]
[[links]]
between = ["r1", "h2"]
emulator = "wire"
forward = { rate = "20mbit", qdisc = "fq_codel" }
""",
    "guest": f"""
name = "bguest"
[nodes.h1]
[nodes.r1]
vm = {{ kernel = "{KERNEL}", vcpus = 2, memory = "512M" }}
[nodes.h2]
[[links]]
between = ["h1", "r1"]
[[links]]
between = ["r1", "h2"]
forward = {{ rate = "20mbit", qdisc = "fq_codel" }}
""",
}


def _in(ns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


@contextmanager
def _servers(ns: str) -> Iterator[None]:
    procs = [subprocess.Popen(_in(ns, "iperf3", "-s", "-1", "-p", str(p)),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for p in PORTS]
    try:
        for p in PORTS:
            _wait_listening(ns, p)
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _wait_listening(ns: str, port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = subprocess.run(_in(ns, "ss", "-Hltn", f"sport = :{port}"),
                             capture_output=True, text=True, check=False).stdout
        if out.strip():
            return
        time.sleep(0.02)
    raise RuntimeError(f"iperf3 on port {port} did not listen")


def _ping(ns: str, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(_in(ns, "ping", "-D", "-n", "-i", "0.1", "-w", str(seconds),
                                "h2-v4"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def _rtts(proc: subprocess.Popen[str]) -> list[tuple[float, float]]:
    out, _ = proc.communicate(timeout=60)
    return [(float(t) - float(r) / 1e3, float(r)) for t, r in _PING.findall(out)]


def _p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[98]


def measure(h1: str, h2: str) -> dict[str, float]:
    idle = [r for _, r in _rtts(_ping(h1, 3))]
    with _servers(h2):
        flows = [subprocess.Popen(_in(h1, "iperf3", "-c", "h2-v4", "-p", str(p), "-J",
                                      "-C", "cubic", "-t", str(LOAD_S)),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for p in PORTS]
        ping = _ping(h1, LOAD_S)
        data = [json.loads(f.communicate(timeout=90)[0]) for f in flows]
        loaded = _rtts(ping)
    tail = [r for t, r in loaded if t >= loaded[0][0] + WARM_S]
    mbit = sum(sum(i["sum"]["bytes"] for i in d["intervals"][WARM_S:]) * 8
               / ((LOAD_S - WARM_S) * 1e6) for d in data)
    return {"idle_ms": statistics.median(idle), "median_ms": statistics.median(tail),
            "p99_ms": _p99(tail), "goodput_mbit": mbit, "pings": len(tail)}


def one(kind: str, reps: int) -> list[dict[str, float]]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{kind}.toml"
        path.write_text(LABS[kind])
        lab = load_lab(path)
        up = build.up(lab)
        try:
            h1, h2 = (up.plan.node(n).netns for n in ("h1", "h2"))
            assert h1 is not None and h2 is not None
            return [measure(h1, h2) for _ in range(reps)]
        finally:
            build.down(lab.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=sorted(LABS))
    args = ap.parse_args()
    kinds = [args.only] if args.only else ["wire", "guest"]
    results = {k: one(k, args.reps) for k in kinds}
    print(f"20 Mbit/s fq_codel, 3 cubic uploads, {LOAD_S} s; payload rate "
          f"{PAYLOAD_MBIT:.2f} Mbit/s; per repetition, then the median of each column")
    print(f"{'fq_codel':<22}{'idle RTT':>10}{'median RTT':>12}{'p99 RTT':>10}"
          f"{'goodput':>14}")
    for kind, rows in results.items():
        name = "hoplab-wire" if kind == "wire" else "guest kernel 6.12"
        for r in [*rows, {k: statistics.median(x[k] for x in rows) for k in rows[0]}]:
            print(f"{name:<22}{r['idle_ms']:>8.2f}ms{r['median_ms']:>10.2f}ms"
                  f"{r['p99_ms']:>8.2f}ms{r['goodput_mbit']:>9.2f} Mbit/s")
            name = "  (median)" if r is rows[-1] else ""
    print(json.dumps(results))


if __name__ == "__main__":
    main()
