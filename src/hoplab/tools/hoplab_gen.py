"""hoplab-gen (gen/, a Rust program `make setup` builds into the venv): the throughput
kind's frame generator. argv builders and pure parsers of its one-line JSON reports.

`send` writes whole Ethernet frames to an AF_PACKET socket, through the interface's
qdisc, as a lab shapes a link at its sender's egress (the fast path: it needs the next
hop's MAC, hoplab.kinds.throughput_link), or sends UDP datagrams (where the fast path
cannot run); either way it spaces frames evenly in timed
sendmmsg batches (at most 20 us of frames in one),
sleeping through each gap at real-time priority, and, behind its schedule by more than
10 frames (or 0.5 ms), starts its schedule again instead of catching up in a burst: a
stall shows in its own record, frames sent over its sending time, which the search
judges (hoplab.analysis.ndr). `recv` counts stamped
frames (sequence number and send time in the first 12 bytes of the payload) and gives
their one-way latency on the machine's clock and the share out of order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from hoplab.tools import ToolOutputError, built_binary, load_json

BINARY = "hoplab-gen"


def binary() -> Path | None:
    """Where hoplab-gen is (hoplab.tools.built_binary: $HOPLAB_GEN, the venv, the crate's build)."""
    return built_binary(BINARY, "HOPLAB_GEN", "gen")


@dataclass(frozen=True)
class Link:
    """What the fast path writes into each frame: the interface it leaves by, the
    source address, the interface's MAC and the next hop's."""

    dev: str
    src: str
    src_mac: str
    dst_mac: str


def send_argv(exe: str, dst: str, port: int, payload: int, *, flows: int = 1,
              fps: float | None = None, frames: int | None = None,
              seconds: float | None = None, link: Link | None = None,
              around_qdisc: bool = False) -> list[str]:
    """Frames of `payload` bytes to dst:port; at `fps` (None: as fast as it can) until
    `frames` are sent or `seconds` have passed. Given a `link`, whole Ethernet frames
    to an AF_PACKET socket on its interface (the fast path), through its qdisc or, with
    `around_qdisc`, past it; without, UDP sockets."""
    if frames is None and seconds is None:
        raise ValueError("a send needs a count of frames or a time")
    argv = [exe, "send", "--dst", dst, "--port", str(port), "--payload", str(payload),
            "--flows", str(flows)]
    if fps is not None:
        argv += ["--rate", f"{fps:.3f}"]
    if frames is not None:
        argv += ["--count", str(frames)]
    if seconds is not None:
        argv += ["--seconds", f"{seconds:g}"]
    if link is not None:
        argv += ["--dev", link.dev, "--src", link.src, "--src-mac", link.src_mac,
                 "--dst-mac", link.dst_mac]
        if around_qdisc:
            argv += ["--qdisc", "around"]
    return argv


def recv_argv(exe: str, bind: str, port: int, idle_s: float, max_s: float) -> list[str]:
    """Counts frames on bind:port until none came for `idle_s` (after the first) or
    `max_s` passed."""
    return [exe, "recv", "--bind", bind, "--port", str(port), "--idle", f"{idle_s:g}",
            "--max", f"{max_s:g}"]


def wire(text: str) -> str:
    """Which way `send` sent ("packet": AF_PACKET, "udp": UDP sockets)."""
    doc = load_json(BINARY, text.strip().splitlines()[-1] if text.strip() else text)
    way = doc.get("wire")
    if way not in ("packet", "udp"):
        raise ToolOutputError(f"{BINARY}: no wire in its report: {text!r}")
    return str(way)


class Sent(NamedTuple):
    """What a sender did: frames offered, over how many seconds, and of those seconds
    how many it lost in stalls (0 where the generator keeps no such record, as iperf3)."""

    frames: int
    seconds: float
    stalled_s: float = 0.0


def sent(text: str) -> Sent:
    """Frames offered, seconds of sending and seconds stalled, from `send`'s report.
    Paced, the frames the kernel refused at their time (a full socket buffer: the path's
    ingress pushing back, as a veth's peer does) count as offered, and lost: the path
    did not take them. A stall is a restart of its schedule late by more than twice the
    lag it catches up (gen/src/pace.rs): it went unrun that long, where a sender too
    slow for the rate falls behind a batch at a time."""
    doc = load_json(BINARY, text.strip().splitlines()[-1] if text.strip() else text)
    n, s, stalled = doc.get("sent"), doc.get("seconds"), doc.get("stalled", 0.0)
    if not isinstance(n, int) or not isinstance(s, int | float) or s <= 0:
        raise ToolOutputError(f"{BINARY}: no frames and seconds in its report: {text!r}")
    if not isinstance(stalled, int | float) or not 0 <= stalled <= s:
        raise ToolOutputError(f"{BINARY}: stalled is seconds within its sending time: "
                              f"{text!r}")
    return Sent(n, float(s), float(stalled))


@dataclass(frozen=True)
class Received:
    frames: int
    out_of_order: int
    median_us: float | None
    p99_us: float | None
    max_us: float | None


def received(text: str) -> Received:
    """What `recv` counted and timed."""
    doc = load_json(BINARY, text.strip().splitlines()[-1] if text.strip() else text)
    n, ooo, lat = doc.get("received"), doc.get("out_of_order"), doc.get("latency_us")
    if not isinstance(n, int) or not isinstance(ooo, int) or not isinstance(lat, dict):
        raise ToolOutputError(f"{BINARY}: no counts in its report: {text!r}")

    def us(key: str) -> float | None:
        v = lat.get(key)
        return float(v) if isinstance(v, int | float) else None
    return Received(n, ooo, us("median"), us("p99"), us("max"))
