"""What one tcp_info sample costs, three ways, with one iperf3 flow running in the lab.

The tcp_info sampler reads a node's established TCP sockets once per tick. Measured here
in the client's namespace, each as CPU time per sample (median of --reps runs of
--samples samples):

- netlink: a sock_diag dump of both families, decoded (hoplab.tools.inet_diag; what
  the sampler does), in a thread that entered the namespace: that thread's CPU;
- ss: `ss -tinH state established` forked from that thread and its text parsed: the
  thread's CPU and the child's;
- loop: one long-lived shell in the namespace running `ss -tinH` then `sleep 0.1`,
  its own and its children's CPU (/proc/PID/stat) over --samples iterations.

Run as root: .venv/bin/python bench/tcp_info.py [--samples 50] [--reps 3]
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from hoplab.lab import build
from hoplab.nodes.netns import entered
from hoplab.nodes.netns_exec import _tcp_sockets
from hoplab.spec import load_lab_text
from hoplab.tools import inet_diag, ss

LAB = ('name = "benchti"\n[nodes.client]\n[nodes.server]\n'
       '[[links]]\nbetween = ["client", "server"]\nrate = "20mbit"\n')


def _children_s() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _in_ns(netns: str, job: Callable[[], float]) -> float:
    out: list[float] = []

    def run() -> None:
        with entered(netns):
            out.append(job())
    th = threading.Thread(target=run)
    th.start()
    th.join()
    return out[0]


def _netlink(n: int) -> float:
    diag = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, inet_diag.NETLINK_SOCK_DIAG)
    diag.bind((0, 0))
    began = time.thread_time()
    for _ in range(n):
        _tcp_sockets(diag)
    used = time.thread_time() - began
    diag.close()
    return used / n


def _ss(n: int) -> float:
    began, kids = time.thread_time(), _children_s()
    for _ in range(n):
        ss.parse(subprocess.run(ss.argv(), capture_output=True, text=True, check=True).stdout)
    return (time.thread_time() - began + _children_s() - kids) / n


def _loop(netns: str, n: int) -> float:
    script = f'i=0; while [ $i -lt {n} ]; do ss -tinH state established >/dev/null; ' \
             'sleep 0.1; i=$((i+1)); done; cat /proc/$$/stat'
    out = subprocess.run(["ip", "netns", "exec", netns, "sh", "-c", script],
                         capture_output=True, text=True, check=True).stdout
    fields = out.rpartition(")")[2].split()
    ticks = sum(int(x) for x in fields[11:15])     # utime, stime, cutime, cstime
    return ticks / 100 / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    up = build.up(load_lab_text(LAB, "bench-tcp-info.toml"))
    client, server = (up.plan.node(n) for n in ("client", "server"))
    addr = str(server.primary4)
    srv = subprocess.Popen(["ip", "netns", "exec", server.netns, "iperf3", "-s", "-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cli = None
    try:
        time.sleep(0.5)
        cli = subprocess.Popen(["ip", "netns", "exec", client.netns, "iperf3", "-c", addr,
                                "-t", "600"], stdout=subprocess.DEVNULL)
        time.sleep(1.0)
        got = {"netlink": [], "ss": [], "loop": []}  # type: dict[str, list[float]]
        for _ in range(args.reps):
            got["netlink"].append(_in_ns(client.netns, lambda: _netlink(args.samples)))
            got["ss"].append(_in_ns(client.netns, lambda: _ss(args.samples)))
            got["loop"].append(_loop(client.netns, args.samples))
        socks = _in_ns(client.netns, lambda: float(len(_tcp_sockets_once())))
        print(f"sockets in the namespace: {socks:.0f}")
        for name, values in got.items():
            print(f"{name:8s} {1000 * statistics.median(values):6.2f} ms CPU per sample")
    finally:
        for p in (cli, srv):
            if p is not None:
                p.terminate()
                p.wait(10)
        build.down(up.plan.lab.name)
    return 0


def _tcp_sockets_once() -> list[ss.Socket]:
    diag = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, inet_diag.NETLINK_SOCK_DIAG)
    diag.bind((0, 0))
    try:
        return _tcp_sockets(diag)
    finally:
        diag.close()


if __name__ == "__main__":
    sys.exit(main())
