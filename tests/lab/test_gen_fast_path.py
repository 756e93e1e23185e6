"""hoplab-gen's fast path (whole Ethernet frames to an AF_PACKET socket, gen/src/packet.rs)
through a shaped link: every frame arrives, of the size asked for, and the receiving
stack takes it (its UDP checksum, which hoplab-gen computes, is right: a frame with a
wrong one is dropped before any socket).

Known answers: frames sent below the shaper's rate and its queue all arrive. 10 Mbit/s
passes 20,833 frames/s of 64 bytes and 823 of 1518; 2,000 and 400 frames/s for a second
are a tenth and a half of those, so nothing waits in the 20-frame queue long.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.kinds.flow import address
from hoplab.kinds.throughput_link import resolve
from hoplab.lab.shaping import burst_bytes
from hoplab.nodes.executor import Executor
from hoplab.nodes.registry import close_all, executors
from hoplab.run.procs import ProcessGroup, wait_listening
from hoplab.tools import hoplab_gen, rxcount, trafgen
from tests.helpers.lab import LabUp

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(hoplab_gen.binary() is None,
                                 reason="hoplab-gen is built by make setup (make gen)")]

LAB = """[addressing]
ipv6 = false
[nodes.client]
[nodes.r]
[nodes.server]
[[links]]
between = ["client", "r"]
[[links]]
between = ["r", "server"]
rate = "10mbit"
queue = 20
"""
TABLE = "hoplab_fast_path"


@pytest.fixture
def nodes(lab_up: LabUp) -> Iterator[tuple[dict[str, Executor], str, str]]:
    up = lab_up(LAB)
    ex = executors(up.plan)
    try:
        yield (dict(ex), address(up.plan, "client", 4), address(up.plan, "server", 4))
    finally:
        close_all(ex)


def _send(ex: Executor, dst: str, link: hoplab_gen.Link, port: int, size: int,
          fps: float, frames: int, around_qdisc: bool = False) -> tuple[int, str]:
    argv = hoplab_gen.send_argv(str(hoplab_gen.binary()), dst, port,
                                trafgen.payload_bytes(size, 4), fps=fps, frames=frames,
                                link=link, around_qdisc=around_qdisc)
    return _sent(ex, argv)[:2]


def _sent(ex: Executor, argv: list[str]) -> tuple[int, str, float]:
    """(frames sent, the wire, seconds it sent for by its own clock)."""
    done = ex.run(argv, timeout=60)
    assert done.returncode == 0, done.stderr
    got = hoplab_gen.sent(done.stdout)
    return got.frames, hoplab_gen.wire(done.stdout), got.seconds


def _drained(ex: Executor) -> None:
    """Returns once the shaper's queues on the node's eth0 hold nothing."""
    limit = time.monotonic() + 10
    while time.monotonic() < limit:
        doc = json.loads(ex.run(["tc", "-j", "-s", "qdisc", "show", "dev", "eth0"]).stdout)
        if all(q.get("qlen", 0) == 0 and q.get("backlog", 0) == 0 for q in doc):
            return
        time.sleep(0.02)
    raise AssertionError("the shaper's queue did not drain in 10 s")


def test_frames_of_64_and_1518_bytes_arrive_counted_by_size(
        nodes: tuple[dict[str, Executor], str, str]) -> None:
    ex, src, dst = nodes
    link = resolve(ex["client"], dst, 4, src)
    assert link is not None and link.dev == "eth0" and link.src == src
    streams = [(5201, 64, 2_000.0, 2_000), (5202, 1518, 400.0, 400)]
    rules = rxcount.ruleset(TABLE, "eth0", [(p, trafgen.payload_bytes(s, 4) + 8)
                                            for p, s, _, _ in streams])
    assert ex["server"].run(rxcount.load_argv(), input=rules, timeout=30).returncode == 0
    try:
        for port, size, fps, frames in streams:
            before = rxcount.frames(ex["server"].run(rxcount.read_argv(TABLE)).stdout)
            assert _send(ex["client"], dst, link, port, size, fps, frames) == (frames, "packet")
            # Each frame is counted once the shaper lets it through: the queue empties
            # in 20 frames' time; a frame of the wrong length is never counted.
            limit = time.monotonic() + 10
            while (got := rxcount.frames(ex["server"].run(rxcount.read_argv(TABLE)).stdout)
                   - before) < frames and time.monotonic() < limit:
                time.sleep(0.05)
            assert got == frames, (size, got)
    finally:
        ex["server"].run(rxcount.delete_argv(TABLE), timeout=30)


def test_the_receiving_stack_takes_every_frame(
        nodes: tuple[dict[str, Executor], str, str], tmp_path: Path) -> None:
    """hoplab-gen's receiver is a UDP socket: a frame reaches it only if its IPv4 and
    UDP checksums are right."""
    ex, src, dst = nodes
    link = resolve(ex["client"], dst, 4, src)
    assert link is not None
    exe = str(hoplab_gen.binary())
    group = ProcessGroup(tmp_path, ex, "fastpath")
    try:
        recv = group.start("recv", "server", hoplab_gen.recv_argv(exe, dst, 5203, 1.0, 60))
        wait_listening(ex["server"], "udp", [5203], [recv])
        assert _send(ex["client"], dst, link, 5203, 64, 1_000.0, 500) == (500, "packet")
        limit = time.monotonic() + 30
        while recv.poll() is None and time.monotonic() < limit:
            time.sleep(0.05)
        assert hoplab_gen.received(recv.output().decode()).frames == 500
    finally:
        group.stop_all()


def test_a_shaper_on_the_senders_own_egress_holds_the_frames_back(lab_up: LabUp) -> None:
    """A lab shapes a link at its sender's egress: the fast path's frames go through
    that qdisc, not around it. 40,000 frames of 64 bytes in a second at a link of
    10 Mbit/s (20,833 frames/s) with a 20-frame queue: what arrives is at most
    R x T + B + Q (HTB's bucket of 60-byte frames, hoplab.lab.shaping.burst_bytes).
    Asked to go around it (`--qdisc around`, the generator's ceiling), all 40,000
    arrive. T is the generator's own sending time: a stall stretches it, and the shaper
    passes R over it (a fresh-clone run read 22,881 against 1 s's 21,971, the send
    stretched to 1.044 s)."""
    up = lab_up('[addressing]\nipv6 = false\n[nodes.a]\n[nodes.b]\n[[links]]\n'
                'between = ["a", "b"]\nrate = "10mbit"\nqueue = 20\n')
    ex = executors(up.plan)
    try:
        src, dst = address(up.plan, "a", 4), address(up.plan, "b", 4)
        link = resolve(ex["a"], dst, 4, src)
        assert link is not None
        rules = rxcount.ruleset(TABLE, "eth0", [(5201, trafgen.payload_bytes(64, 4) + 8)])
        assert ex["b"].run(rxcount.load_argv(), input=rules, timeout=30).returncode == 0
        argv = hoplab_gen.send_argv(str(hoplab_gen.binary()), dst, 5201,
                                    trafgen.payload_bytes(64, 4), fps=40_000.0,
                                    frames=40_000, link=link)
        sent, wire, took = _sent(ex["a"], argv)
        assert (sent, wire) == (40_000, "packet")
        _drained(ex["a"])
        got = rxcount.frames(ex["b"].run(rxcount.read_argv(TABLE)).stdout)
        most = 10e6 / (60 * 8) * took + burst_bytes(10_000_000) / 60 + 20
        assert 0.9 * 10e6 / (60 * 8) <= got <= most * 1.02, (got, most, took)
        assert _send(ex["a"], dst, link, 5201, 64, 40_000.0, 40_000,
                     around_qdisc=True) == (40_000, "packet")
        past = rxcount.frames(ex["b"].run(rxcount.read_argv(TABLE)).stdout) - got
        assert past == 40_000, past
    finally:
        close_all(ex)
