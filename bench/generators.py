"""Which frame generator the throughput kind uses, by measurement: iperf3 over UDP (its
pacing timer at 100 us) against trafgen (netsniff-ng, a memory-mapped ring), on this
machine, through a lab of client - r - server whose r -> server link is shaped to
50 Mbit/s with a queue of 20 frames (HTB's bucket: 64 KiB + one frame).

    .venv/bin/python bench/generators.py

For each generator it prints its ceiling (frames/s sent with no pacing, 64- and
1518-byte frames) and how many frames a paced stream well below the link's rate loses
(1518-byte frames at 100 and 2,000 frames/s, 1.2 and 24 Mbit/s): a generator that paces
evenly loses none; one that sends bursts loses what the bucket and queue cannot hold.
Needs root.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hoplab.lab.where import netns_prefix
from hoplab.tools import iproute_json, rxcount, trafgen

HOPLAB = str(Path(sys.executable).with_name("hoplab"))
LAB = """name = "genbench"
[addressing]
ipv6 = false
[nodes.client]
[nodes.r]
[nodes.server]
[[links]]
between = ["client", "r"]
[[links]]
between = ["r", "server"]
rate = "50mbit"
queue = 20
"""
PORT = 5201


def ns(node: str) -> list[str]:
    return ["ip", "netns", "exec", f"{netns_prefix('genbench')}{node}"]


def sh(argv: list[str], input: str | None = None) -> str:
    return subprocess.run(argv, input=input, capture_output=True, text=True,
                          check=True).stdout


def counted() -> int:
    return rxcount.frames(sh(ns("server") + rxcount.read_argv("genbench")))


def trafgen_send(conf: str, frames: int, fps: float | None) -> tuple[int, float]:
    t = time.perf_counter()
    out = sh(ns("client") + trafgen.argv("eth0", conf, frames, fps))
    return trafgen.frames_sent(out), time.perf_counter() - t


def iperf3_send(dst: str, payload: int, frames: int, fps: float | None) -> tuple[int, float]:
    argv = ["iperf3", "-c", dst, "-p", str(PORT), "-u", "-l", str(payload), "-J",
            "--pacing-timer", "100"]
    argv += ["-b", "0", "-t", "1"] if fps is None else [
        "-b", str(round(fps * payload * 8)), "-k", str(frames)]
    total = json.loads(sh(ns("client") + argv))["end"]["sum"]
    return int(total["packets"]), float(total["seconds"])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        lab = Path(tmp) / "lab.toml"
        lab.write_text(LAB)
        subprocess.run([HOPLAB, "lab", "up", str(lab)], check=True, capture_output=True)
        server = None
        try:
            dst = json.loads(sh([*ns("server"), "ip", "-j", "-4", "addr", "show", "eth0"])
                             )[0]["addr_info"][0]["local"]
            route = iproute_json.route(sh(ns("client") + iproute_json.route_get_argv(dst)),
                                       dst)
            sh([*ns("client"), "ping", "-c", "1", "-W", "1", dst])
            src_ip = json.loads(sh([*ns("client"), "ip", "-j", "-4", "addr", "show", "eth0"])
                                )[0]["addr_info"][0]["local"]
            src_mac = iproute_json.mac(sh(ns("client") + iproute_json.link_argv("eth0")),
                                       "eth0")
            nh_mac = iproute_json.neighbour_mac(sh(ns("client") + iproute_json.neigh_argv(
                route.next_hop, route.dev)))
            assert nh_mac is not None
            server = subprocess.Popen([*ns("server"), "iperf3", "-s", "-p", str(PORT)],
                                      stdout=subprocess.DEVNULL)
            time.sleep(0.5)  # a bench, not a test: iperf3's listen is not watched here
            confs: dict[int, str] = {}
            for size in (64, 1518):
                confs[size] = str(Path(tmp) / f"{size}.cfg")
                Path(confs[size]).write_text(trafgen.config(trafgen.Stream(
                    src_mac, nh_mac, src_ip, dst, size, PORT)))
            sh(ns("server") + rxcount.load_argv(), input=rxcount.ruleset(
                "genbench", "eth0", [(PORT, trafgen.payload_bytes(s, 4) + 8)
                                     for s in (64, 1518)]))
            print("generator  ceiling 64 B   ceiling 1518 B   loss at 100/s   loss at 2000/s")
            for name in ("iperf3", "trafgen"):
                row = [name]
                for size in (64, 1518):
                    payload = trafgen.payload_bytes(size, 4)
                    sent, took = (iperf3_send(dst, payload, 0, None) if name == "iperf3"
                                  else trafgen_send(confs[size], 300_000, None))
                    row.append(f"{sent / took:10.0f}/s")
                for fps in (100, 2000):
                    frames = fps * 2
                    before = counted()
                    payload = trafgen.payload_bytes(1518, 4)
                    sent, _ = (iperf3_send(dst, payload, frames, fps) if name == "iperf3"
                               else trafgen_send(confs[1518], frames, fps))
                    time.sleep(0.5)
                    got = counted() - before
                    row.append(f"{100 * (sent - got) / sent:12.1f} %")
                print("  ".join(row))
        finally:
            if server is not None:
                server.terminate()
                server.wait()
            subprocess.run([HOPLAB, "lab", "down", "genbench"], capture_output=True)


if __name__ == "__main__":
    main()
