#!/usr/bin/env python3
"""How fast can one network namespace be configured? The measurement behind
hoplab.lab.netns (setns() in a worker thread + a plain `ip -batch` child).

For N namespaces (default 200), each gets the same few operations: lo up, its
veth end up, one IPv4 address, one route via the neighbour. Three ways:

  a  `ip -n NS -batch -` per namespace (iproute2 enters the namespace itself,
     and also unshares a mount namespace and remounts /sys to do so)
  b  setns() of the calling thread (hoplab.lab.netns.entered), then a plain
     `ip -batch -` child, which inherits the thread's namespace
  c  pyroute2 IPRoute() opened inside the namespace (entered), same operations
     over netlink, no child process

Every method gets freshly created namespaces and veths (set up and removed
outside the timed part). Rounds are interleaved (a b c, a b c, ...) and the
median is printed, in ms per namespace, both one namespace after the other
("sequential") and spread over a thread pool the size hoplab uses.

Run as root:  .venv/bin/python bench/netns_methods.py [--n 200] [--rounds 3]
Namespaces are named hoplab-bench-<pid>-<i> and always deleted at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from hoplab.nodes import netns
from hoplab.nodes.each import workers

PREFIX = f"hoplab-bench-{os.getpid()}-"
IFNAME = "eth0"


def ns_name(i: int) -> str:
    return f"{PREFIX}{i}"


def addr_of(i: int) -> tuple[str, str]:
    """(own address, neighbour address) of namespace i; pairs 2k, 2k+1 share a /30."""
    pair = i // 2
    base = (10 << 24) | (pair << 2)
    own = base + 1 + (i % 2)
    peer = base + 1 + ((i + 1) % 2)

    def dotted(v: int) -> str:
        return ".".join(str((v >> s) & 255) for s in (24, 16, 8, 0))

    return dotted(own), dotted(peer)


def route_dst(i: int) -> str:
    return f"172.{16 + (i % 16)}.{(i // 16) % 256}.0/24"


def ip_lines(i: int) -> list[str]:
    own, peer = addr_of(i)
    return [
        "link set lo up",
        f"link set {IFNAME} up",
        f"addr add {own}/30 dev {IFNAME}",
        f"route add {route_dst(i)} via {peer} dev {IFNAME}",
    ]


def _run_batch(argv: list[str], lines: list[str]) -> None:
    proc = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")


def root_batch(lines: list[str], force: bool = False) -> None:
    if lines:
        _run_batch(["ip", *(["-force"] if force else []), "-batch", "-"], lines)


# --- the three methods -------------------------------------------------------

def method_ip_n(i: int) -> None:
    _run_batch(["ip", "-n", ns_name(i), "-batch", "-"], ip_lines(i))


def method_setns_ip(i: int) -> None:
    with netns.entered(ns_name(i)):
        _run_batch(["ip", "-batch", "-"], ip_lines(i))


def method_pyroute2(i: int) -> None:
    # The whole IPRoute session (open, work, close) happens inside the namespace: the
    # netlink socket belongs to the namespace of the thread that creates it.
    from pyroute2 import IPRoute

    own, peer = addr_of(i)
    with netns.entered(ns_name(i)), IPRoute() as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        dev = ipr.link_lookup(ifname=IFNAME)[0]
        ipr.link("set", index=lo, state="up")
        ipr.link("set", index=dev, state="up")
        ipr.addr("add", index=dev, address=own, prefixlen=30)
        dst, plen = route_dst(i).split("/")
        ipr.route("add", dst=dst, dst_len=int(plen), gateway=peer, oif=dev)


METHODS: dict[str, tuple[str, Callable[[int], None]]] = {
    "a": ("ip -n NS -batch -", method_ip_n),
    "b": ("setns() thread + ip -batch -", method_setns_ip),
    "c": ("pyroute2 IPRoute() inside the namespace", method_pyroute2),
}


# --- fixture: namespaces and veths, outside the timed part -------------------

def create(n: int) -> None:
    root_batch([f"netns add {ns_name(i)}" for i in range(n)])
    root_batch([f"link add {IFNAME} netns {ns_name(i)} type veth "
                f"peer name {IFNAME} netns {ns_name(i + 1)}" for i in range(0, n, 2)])


def destroy() -> None:
    left = netns.listed(PREFIX)
    if left:
        root_batch([f"netns del {ns}" for ns in left], force=True)
    for ns in netns.listed(PREFIX):  # whatever the batch could not remove
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def verify(n: int) -> None:
    """Spot-check that the method really configured the namespaces."""
    for i in (0, n - 1):
        with netns.entered(ns_name(i)):
            out = subprocess.run(["ip", "-o", "route", "show", route_dst(i)],
                                 capture_output=True, text=True, check=False).stdout
        if "via" not in out:
            raise RuntimeError(f"namespace {ns_name(i)} is missing its route")


def timed(n: int, job: Callable[[int], None], threads: int) -> float:
    create(n)
    try:
        t0 = time.perf_counter()
        if threads <= 1:
            for i in range(n):
                job(i)
        else:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                list(pool.map(job, range(n)))
        elapsed = time.perf_counter() - t0
        verify(n)
        return elapsed
    finally:
        destroy()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=200, help="namespaces per measurement (even)")
    p.add_argument("--rounds", type=int, default=5, help="repetitions; the median is shown")
    p.add_argument("--threads", type=int, default=workers(),
                   help="pool size for the parallel column (default: hoplab's, %(default)s)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("netns_methods: needs root", file=sys.stderr)
        return 2
    n = args.n + (args.n % 2)
    modes = [("sequential", 1), (f"pool of {args.threads}", args.threads)]
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        # Warm-up: page cache for ip, pyroute2 import.
        for key in METHODS:
            timed(4, METHODS[key][1], 1)
        for r in range(args.rounds):
            for mode, threads in modes:
                for key, (_label, job) in METHODS.items():
                    s = timed(n, job, threads)
                    samples.setdefault((key, mode), []).append(s)
                    print(f"round {r + 1} {mode:>12} {key}: {s * 1e3 / n:.2f} ms/ns",
                          file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        destroy()
    rows = []
    for key, (label, _job) in METHODS.items():
        row = {"method": key, "label": label}
        for mode, _threads in modes:
            s = statistics.median(samples[(key, mode)])
            row[mode] = round(s * 1e3 / n, 3)
        rows.append(row)
    if args.json:
        print(json.dumps({"namespaces": n, "rounds": args.rounds, "cpus": os.cpu_count(),
                          "unit": "ms per namespace (wall time / N, median of rounds)",
                          "results": rows}, indent=1))
        return 0
    cols = [m for m, _ in modes]
    print(f"Configuring {n} namespaces (lo up, veth up, 1 address, 1 route), "
          f"median of {args.rounds} rounds, {os.cpu_count()} CPUs")
    print(f"{'method':<46}" + "".join(f"{c:>16}" for c in cols))
    for row in rows:
        print(f"{row['method']}  {row['label']:<43}"
              + "".join(f"{row[c]:>13.2f} ms" for c in cols))
    print("ms per namespace = wall time for all N / N")
    return 0


if __name__ == "__main__":
    sys.exit(main())
