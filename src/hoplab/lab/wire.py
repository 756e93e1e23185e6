"""The userspace wire: links whose impairments `hoplab-wire` makes instead of netem.

A wired link is node A's interface, a veth into a hidden wire namespace
(`hoplab-LAB.w.INDEX`: a dot never appears in a node name, so it cannot clash),
the `hoplab-wire` process there, and a veth out to node B. The wire writes its
counters to a JSON file in the lab's run directory every 100 ms; the file's
first appearance means both sockets are bound and frames flow.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoplab.errors import LabError
from hoplab.held_stops import stops_held
from hoplab.lab.where import netns_prefix
from hoplab.nodes.registry import in_namespace
from hoplab.spec.model import Direction, Link
from hoplab.tools import built_binary

BINARY = "hoplab-wire"
# The wire-side interfaces: towards node A and towards node B.
IF_A, IF_B = "wa", "wb"
START_TIMEOUT_S = 5.0
STATS_INTERVAL_S = 0.1

# Started wires, kept so that a wire reaped by teardown can be marked done
# (Popen warns about a child it still believes to be running).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def binary() -> Path | None:
    """Where hoplab-wire is: $HOPLAB_WIRE, the venv, the crate's build (tools.built_binary)."""
    return built_binary(BINARY, "HOPLAB_WIRE", "wire")


def netns_name(lab: str, index: int) -> str:
    return f"{netns_prefix(lab)}w.{index}"


# Below this rate a bottleneck serialises packets one by one, as a real slow link
# does: a 64 KiB super-frame would take 5 ms at 100 Mbit/s and arrive as one burst.
PER_PACKET_BELOW_BPS = 1_000_000_000


def per_packet(d: Direction) -> bool:
    """Impairments that must act on every packet, not on a 64 KiB GSO super-frame:
    the sender's segmentation offloads are turned off for these directions.
    Measured: a 12 Mbit/s trace carried 10.3 Mbit/s of TCP with super-frames
    (bursts left the queue empty) and 11.6 Mbit/s per packet."""
    slow = d.rate_bps is not None and d.rate_bps < PER_PACKET_BELOW_BPS
    return bool(d.loss_pct or d.duplicate_pct or d.jitter_s or d.trace or slow or d.pps)


def direction_spec(d: Direction, seed: int) -> str:
    """The wire's `--forward`/`--reverse` argument for one direction."""
    parts: list[str] = []
    if d.delay_s:
        parts.append(f"delay={d.delay_s!r}")
    if d.jitter_s:
        parts.append(f"jitter={d.jitter_s!r}")
        parts.append(f"reorder={0 if d.reorder is False else 1}")
    if d.loss_pct:
        parts.append(f"loss={d.loss_pct!r}")
        if d.loss_burst:
            parts.append(f"loss_burst={d.loss_burst!r}")
    if d.duplicate_pct:
        parts.append(f"dup={d.duplicate_pct!r}")
    if d.rate_bps is not None:
        parts.append(f"rate={d.rate_bps}")
    if d.pps is not None:
        parts.append(f"pps={d.pps}")
    if d.trace is not None:
        if "," in d.trace or "=" in d.trace:
            raise LabError(f"trace file path {d.trace!r} may not contain ',' or '='")
        parts.append(f"trace={d.trace}")
    if d.queue is not None and d.queue.packets is not None:
        parts.append(f"queue_packets={d.queue.packets}")
    elif d.queue is not None and d.queue.bytes is not None:
        parts.append(f"queue_bytes={d.queue.bytes}")
    parts += qdisc_spec(d)
    parts.append(f"seed={seed}")
    return ",".join(parts)


def qdisc_spec(d: Direction) -> list[str]:
    """The discipline and its options, tc's names; the link's `queue` bounds it as
    tc's `limit` (packets) or fq_codel's `memory_limit` (bytes), as on the kernel."""
    if d.qdisc not in ("codel", "fq_codel", "sfq"):
        return []
    opts = dict(d.qdisc_options)
    q = d.queue
    if q is not None and q.packets is not None:
        opts.setdefault("limit", q.packets)
    if q is not None and q.bytes is not None and d.qdisc == "fq_codel":
        opts.setdefault("memory_limit", q.bytes)
    out = [f"qdisc={d.qdisc}"]
    for k, v in sorted(opts.items()):
        text = (str(int(v)) if isinstance(v, bool) else
                str(v).replace(",", "+") if k in ("keys", "hosts") else
                repr(v) if isinstance(v, float) else str(v))
        out.append(f"{k}={text}")
    return out


@dataclass(frozen=True)
class WireLink:
    index: int
    label: str
    netns: str
    forward: Direction
    reverse: Direction
    stats: Path

    def argv(self, exe: Path) -> list[str]:
        return [str(exe), "--a", IF_A, "--b", IF_B,
                "--forward", direction_spec(self.forward, 2 * self.index + 1),
                "--reverse", direction_spec(self.reverse, 2 * self.index + 2),
                "--stats", str(self.stats), "--interval", str(STATS_INTERVAL_S)]

    @property
    def short(self) -> str:
        """The name the state record and `lab status` use for the wire."""
        return f"w.{self.index}"


def plan_wires(lab_name: str, links: list[Link], rundir: Path) -> list[WireLink]:
    return [WireLink(lk.index, lk.label, netns_name(lab_name, lk.index), lk.forward, lk.reverse,
                     rundir / "wire" / f"link{lk.index}.json") for lk in links]


def veth_lines(w: WireLink, a: tuple[str, str], b: tuple[str, str], mtu: int | None) -> list[str]:
    """Two veth pairs, A <-> wire and wire <-> B; a and b are (netns, ifname)."""
    m = f" mtu {mtu}" if mtu else ""
    return [f"link add {a[1]} netns {a[0]}{m} type veth peer name {IF_A} netns {w.netns}{m}",
            f"link add {IF_B} netns {w.netns}{m} type veth peer name {b[1]} netns {b[0]}{m}"]


# The wire namespace has no addresses; without IPv6 its interfaces also stay
# silent (no MLD or router solicitations that the wire would carry to the nodes).
SYSCTLS = [("net.ipv6.conf.default.disable_ipv6", "1"), ("net.ipv6.conf.all.disable_ipv6", "1"),
           ("net.ipv4.ip_forward", "0")]
IP_LINES = ["link set lo up", f"link set {IF_A} up", f"link set {IF_B} up"]


def start(w: WireLink, exe: Path) -> subprocess.Popen[bytes]:
    """Start the wire inside its namespace; no waiting (see wait_ready)."""
    forget_exited()
    w.stats.parent.mkdir(parents=True, exist_ok=True)
    w.stats.unlink(missing_ok=True)
    # A stop held while the wire starts: one landing after Popen's fork would lose it.
    with open(w.stats.with_suffix(".log"), "ab") as log, stops_held():
        try:
            proc = in_namespace(w.short, w.netns).popen(
                w.argv(exe), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                # Own session: Ctrl-C is for the engine, which stops the wires itself,
                # in order.
                start_new_session=True)
        except OSError as exc:
            raise LabError(f"cannot start {BINARY} for {w.label}: {exc}") from exc
        _CHILDREN[proc.pid] = proc
    return proc


def wait_ready(w: WireLink, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while not w.stats.exists():
        if proc.poll() is not None:
            raise LabError(f"{BINARY} for {w.label} exited with status {proc.returncode} "
                           f"while starting{_log_tail(w)}")
        if time.monotonic() > deadline:
            raise LabError(f"{BINARY} for {w.label} was not ready within "
                           f"{START_TIMEOUT_S:g} s{_log_tail(w)}")
        time.sleep(0.005)


def _log_tail(w: WireLink) -> str:
    try:
        lines = w.stats.with_suffix(".log").read_text().strip().splitlines()[-5:]
    except OSError:
        return ""
    return (":\n  " + "\n  ".join(lines)) if lines else ""


def forget_exited() -> None:
    """Drop wires that exited or were reaped elsewhere (teardown's stop_recorded)."""
    for pid, proc in list(_CHILDREN.items()):
        if proc.poll() is not None:
            del _CHILDREN[pid]


def read_stats(path: Path) -> dict[str, Any] | None:
    """The wire's last counters, or None when it has not written any (yet)."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data
