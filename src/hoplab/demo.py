"""`make demo`: build the example chain, show reachability and the shaped rate, tear down."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hoplab.errors import HoplabError
from hoplab.lab import build, netns
from hoplab.spec import load_lab

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chain.toml"


def _exec(ns: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    # Through `ip netns exec`, as `hoplab lab exec` does, so lab names resolve.
    return subprocess.run(netns.exec_argv(ns, argv), capture_output=True, text=True,
                          check=False, timeout=120)


def _ping(ns: str, target: str, family: str) -> str:
    proc = _exec(ns, ["ping", family, "-c1", "-W2", "-q", target])
    if proc.returncode != 0:
        return "[red]unreachable[/]"
    rtt = proc.stdout.strip().splitlines()[-1].split("=")[1].split("/")[1]
    return f"{float(rtt):.3f} ms"


def _iperf(client_ns: str, server_ns: str, target: str, seconds: int) -> float:
    server = subprocess.Popen(netns.exec_argv(server_ns, ["iperf3", "-s", "-1"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            probe = netns.run_in(server_ns, ["ss", "-ltnH", "sport = :5201"])
            if probe.stdout.strip():
                break
            time.sleep(0.05)
        proc = _exec(client_ns, ["iperf3", "-c", target, "-t", str(seconds), "-J"])
        data = json.loads(proc.stdout)
        if "error" in data:
            raise HoplabError(f"iperf3: {data['error']}")
        return float(data["end"]["sum_received"]["bits_per_second"])
    finally:
        server.terminate()
        server.wait(timeout=5)


def main() -> int:
    console = Console()
    lab = load_lab(EXAMPLE)
    console.rule(f"hoplab demo: {EXAMPLE.name}")
    result = build.up(lab)
    try:
        plan = result.plan
        console.print(f"lab [bold]{lab.name}[/] up in {result.seconds:.3f} s: "
                      + " - ".join(n.name for n in plan.nodes))
        client = plan.node("client")
        table = Table(title="reachability from client (ping RTT)")
        table.add_column("node")
        table.add_column("IPv4")
        table.add_column("IPv6")
        for node in plan.nodes[1:]:
            table.add_row(node.name, _ping(client.netns, f"{node.name}-v4", "-4"),
                          _ping(client.netns, f"{node.name}-v6", "-6"))
        console.print(table)
        shaped = next(lk for lk in lab.links if lk.forward.rate_bps)
        rate = _iperf(client.netns, plan.node("server").netns, "server-v4", 5)
        limit = shaped.forward.rate_bps or 0
        console.print(f"TCP goodput client -> server across {shaped.a} <-> {shaped.b} "
                      f"(shaped to {limit / 1e6:g} Mbit/s): [bold]{rate / 1e6:.1f} Mbit/s[/] "
                      f"({100 * rate / limit:.1f} % of the link rate)")
    finally:
        for warning in build.down(lab.name):
            console.print(f"warning: {warning}")
        console.print(f"lab {lab.name} is down; nothing left behind")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HoplabError as exc:
        print(f"hoplab demo: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
