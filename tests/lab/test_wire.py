"""Known-answer tests of the userspace wire (hoplab-wire) on real labs.

Each accuracy test is the one docs/wire.md promises: 20 ms delay gives a 40 ms
ping RTT (median of 100, +- 0.5 ms); 1 % loss loses 1 % +- 0.3 points of
10,000 probes; a 50 Mbit/s rate gives TCP goodput within 0.5 % of 47.82 Mbit/s
(the rate counts Ethernet frames: 1448 bytes of payload per 1514-byte frame) and
its byte queue bounds the added latency to queue / rate; a 12-then-24 Mbit/s
trace is followed within 10 %; unimpaired, the wire carries >= 2 Gbit/s.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from hoplab.lab import wire
from hoplab.lab.state import find
from hoplab.lab.status import lab_status
from hoplab.lab.where import netns_prefix
from hoplab.samplers import wire as wire_samples
from tests.helpers.lab import (
    WIRE_CC,
    LabUp,
    iperf3,
    mbit_received,
    namespaces,
    payload_mbit,
    remove_lab,
    steady_goodput,
    stop,
    wait_listening,
    wire_written_since,
)

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(wire.binary() is None, reason="hoplab-wire is not built")]

_RTT = re.compile(r"time=([\d.]+) ms")


def _two(link: str) -> str:
    return ('# wire test\nname = "x"\n[nodes.a]\n[nodes.b]\n'
            f'[[links]]\nbetween = ["a", "b"]\n{link}\n')


def _rtts(out: str) -> list[float]:
    return [float(x) for x in _RTT.findall(out)]


def test_delay_20ms_gives_40ms_rtt(lab_up: LabUp) -> None:
    up = lab_up(_two('emulator = "wire"\ndelay = "20ms"'))
    up.run("a", "ping", "-c", "2", "-i", "0.05", "b")  # neighbour discovery done
    out = up.run("a", "ping", "-c", "100", "-i", "0.01", "b", timeout=30).stdout
    rtts = _rtts(out)
    assert len(rtts) == 100, out[-300:]
    assert abs(statistics.median(rtts) - 40.0) <= 0.5, statistics.median(rtts)


def test_one_percent_loss(lab_up: LabUp) -> None:
    up = lab_up(_two('emulator = "wire"\nforward = { loss = "1%" }'))
    proc = up.run("a", "ping", "-q", "-c", "10000", "-i", "0.0002", "-W", "1", "b", timeout=60)
    m = re.search(r"(\d+) packets transmitted, (\d+) received", proc.stdout)
    assert m is not None, proc.stdout + proc.stderr
    sent, got = int(m.group(1)), int(m.group(2))
    assert sent == 10000
    lost_pct = 100.0 * (sent - got) / sent
    assert abs(lost_pct - 1.0) <= 0.3, lost_pct
    ns = wire.netns_name(up.name, 0)
    wire_written_since(ns, time.time())
    stats = wire_samples.read(ns)
    # The wire may also have dropped an ARP or neighbour solicitation.
    assert 0 <= stats["forward"]["wire.dropped_loss"] - (sent - got) <= 3
    assert stats["reverse"]["wire.dropped_loss"] == 0


# Alone: beside another test (the same one, at the same point of two pool runs) the
# wire's steady goodput read 45.77 and 46.34 Mbit/s against 47.82, while with both
# cores held by busy loops it read 47.8 in 3 of 3 runs: what the neighbour takes is
# not only CPU time (tests/helpers/alone.py, docs/testing.md).
@pytest.mark.alone
def test_rate_50mbit_goodput_and_queue_bound(lab_up: LabUp) -> None:
    # 500 kB at 50 Mbit/s: a full queue adds 80 ms. So deep that a stall of the hosts
    # leaves it occupied: behind a 125 kB queue (20 ms) cubic's steady seconds read down
    # to 44.5 on a busy machine, behind this one 47.81 to 47.84 in 18 of 18 runs.
    up = lab_up(_two('emulator = "wire"\nforward = { rate = "50mbit", queue = "500kb" }'))
    # Over IPv4 ("b" alone resolves to b's IPv6 address first, whose segments carry 20
    # bytes less: 47.16 Mbit/s, which a 2.5 % bound took for 47.82), once steady under
    # cubic (tests/helpers/lab.py's WIRE_CC: BBR, this machine's default, read 47.54 in
    # CI and down to 45.4 here).
    goodput = steady_goodput(up.ns("b"), up.ns("a"), "b-v4", cc=WIRE_CC)
    # The wire's rate counts each frame with its Ethernet header (14 bytes, no FCS,
    # preamble or gap): a full TCP segment is 1514 bytes carrying 1448 of payload.
    # 0.5 %: counting no header would read 0.9 % high, 1000/1024 2.3 % off.
    expected = payload_mbit(50)
    assert abs(goodput - expected) <= 0.005 * expected, (goodput, expected)
    # An overload (UDP at 80 Mbit/s) keeps the queue full: pings then wait bytes / rate.
    pinger = subprocess.Popen(["ip", "netns", "exec", up.ns("a"), "ping", "-i", "0.05", "-c",
                               "50", "b"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        iperf3(up.ns("b"), up.ns("a"), "b-v4", "-u", "-b", "80M", "-l", "1400", seconds=3)
    finally:
        out, _ = pinger.communicate(timeout=20)
    loaded = sorted(_rtts(out)[5:])
    bound_ms = 500_000 * 8 / 50e6 * 1e3
    assert len(loaded) >= 20, out
    # A ping may also wait for a scheduling hiccup of the 2-core machine: the bound is
    # checked on the 90th percentile, the expected value on the median.
    assert loaded[int(0.9 * len(loaded))] <= bound_ms + 1.5, (loaded, bound_ms)
    assert abs(statistics.median(loaded) - bound_ms) <= 1.5, (statistics.median(loaded), bound_ms)


def test_trace_12_then_24_mbit(lab_up: LabUp, tmp_path: Path) -> None:
    # 3 s of one opportunity per ms (12 Mbit/s), then 3 s of two (24 Mbit/s).
    lines = [str(ms) for ms in range(1, 3001)]
    lines += [str(ms) for ms in range(3001, 6001) for _ in (0, 1)]
    (tmp_path / "steps.trace").write_text("\n".join(lines) + "\n")
    text = _two('emulator = "wire"\nforward = { trace = "steps.trace", queue = "100p" }')
    up = lab_up(text)
    started = wire.read_stats(tmp_stats(up.name))
    assert started is not None
    origin = float(started["started"])
    t0 = time.monotonic()
    # UDP offered above both capacities: what arrives is what the trace lets through.
    server = subprocess.Popen(["ip", "netns", "exec", up.ns("b"), "iperf3", "-s", "-1", "-J",
                               "-i", "0.25", "-p", "5202"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_listening(up.ns("b"), 5202, server)
        client = up.run("a", "iperf3", "-c", "b-v4", "-p", "5202", "-u", "-b", "40M", "-l", "1472",
                        "-t", "7", timeout=30)
        assert client.returncode == 0, client.stdout + client.stderr
        out, _ = server.communicate(timeout=10)
    finally:
        stop(server)
    by_phase: dict[float, list[float]] = {12.0: [], 24.0: []}
    for iv in json.loads(out)["intervals"]:
        s = iv["sum"]
        lo, hi = (t0 + s["start"] - origin) % 6.0, (t0 + s["end"] - origin) % 6.0
        # Only intervals within one phase, a little away from the switch.
        for cap, (a, b) in ((12.0, (0.3, 3.0)), (24.0, (3.3, 6.0))):
            if a <= lo < hi <= b:
                by_phase[cap].append(s["bits_per_second"] / 1e6)
    for cap, rates in by_phase.items():
        assert len(rates) >= 3, (cap, by_phase)
        # UDP payload share of a 1500-byte packet: 1472 / 1500.
        expected = cap * 1472 / 1500
        got = statistics.median(rates)
        assert abs(got - expected) <= 0.1 * expected, (cap, got, rates)


def test_tcp_goodput_follows_the_trace(lab_up: LabUp, tmp_path: Path) -> None:
    # The same trace as above, with TCP: its goodput must follow each phase too,
    # including the 12 Mbit/s phase that comes after a 24 Mbit/s one.
    lines = [str(ms) for ms in range(1, 3001)]
    lines += [str(ms) for ms in range(3001, 6001) for _ in (0, 1)]
    (tmp_path / "steps.trace").write_text("\n".join(lines) + "\n")
    up = lab_up(_two('emulator = "wire"\nforward = { trace = "steps.trace", queue = "100p" }'))
    started = wire.read_stats(tmp_stats(up.name))
    assert started is not None
    origin = float(started["started"])
    t0 = time.monotonic()
    server = subprocess.Popen(["ip", "netns", "exec", up.ns("b"), "iperf3", "-s", "-1", "-J",
                               "-i", "0.25", "-p", "5203"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_listening(up.ns("b"), 5203, server)
        client = up.run("a", "iperf3", "-c", "b-v4", "-p", "5203", "-t", "10", timeout=30)
        assert client.returncode == 0, client.stdout + client.stderr
        out, _ = server.communicate(timeout=10)
    finally:
        stop(server)
    by_phase: dict[tuple[float, int], list[float]] = {}
    for iv in json.loads(out)["intervals"]:
        s = iv["sum"]
        start, end = t0 + s["start"] - origin, t0 + s["end"] - origin
        lo, hi = start % 6.0, end % 6.0
        for cap, (a, b) in ((12.0, (0.5, 3.0)), (24.0, (3.5, 6.0))):
            if a <= lo < hi <= b:
                by_phase.setdefault((cap, int(start // 6.0)), []).append(
                    s["bits_per_second"] / 1e6)
    assert {cap for cap, _ in by_phase} == {12.0, 24.0}, by_phase
    for (cap, cycle), rates in by_phase.items():
        # TCP payload of a 1500-byte packet: 1448 bytes (with timestamps).
        expected = cap * 1448 / 1500
        got = statistics.median(rates)
        assert abs(got - expected) <= 0.1 * expected, (cap, cycle, got, rates)


def tmp_stats(lab: str) -> Path:
    return wire_samples.stats_path(wire.netns_name(lab, 0))


def test_unimpaired_speed_and_latency(lab_up: LabUp) -> None:
    text = ('# speed\nname = "x"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n'
            '[[links]]\nbetween = ["a", "b"]\nemulator = "wire"\n'
            '[[links]]\nbetween = ["a", "c"]\n')
    up = lab_up(text)
    data = iperf3(up.ns("b"), up.ns("a"), "b", seconds=2)
    assert mbit_received(data) >= 2000, mbit_received(data)
    for who in ("b", "c"):
        up.run("a", "ping", "-c", "3", "-i", "0.01", who)
    via_wire = _rtts(up.run("a", "ping", "-c", "100", "-i", "0.01", "b").stdout)
    plain = _rtts(up.run("a", "ping", "-c", "100", "-i", "0.01", "c").stdout)
    added_ms = statistics.median(via_wire) - statistics.median(plain)
    # Two wire passes per round trip.
    assert added_ms / 2 < 0.1, (statistics.median(via_wire), statistics.median(plain))


def test_ipv6_and_counters_in_state(lab_up: LabUp) -> None:
    up = lab_up(_two('emulator = "wire"\ndelay = "1ms"'))
    proc = up.run("a", "ping", "-6", "-c", "3", "-i", "0.05", "b-v6")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = find(up.name)
    assert state is not None
    assert [w["netns"] for w in state.summary["wires"]] == [wire.netns_name(up.name, 0)]
    status = lab_status(state)
    assert status["links"][0]["wire"]["running"] is True
    assert not status["problems"], status["problems"]


def test_killed_wire_leaves_link_down_and_teardown_cleans(lab_up: LabUp) -> None:
    up = lab_up(_two('emulator = "wire"'))
    state = find(up.name)
    assert state is not None
    (proc,) = state.processes
    os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while proc.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    status = lab_status(state)
    assert status["status"] == "degraded"
    assert status["links"][0]["wire"]["running"] is False
    assert any("is down" in p for p in status["problems"]), status["problems"]
    assert up.run("a", "ping", "-c", "1", "-W", "1", "b").returncode != 0
    remove_lab(up.name)
    assert not any(n.startswith(netns_prefix(up.name)) for n in namespaces())


def test_wire_exits_when_its_link_goes_away(lab_up: LabUp) -> None:
    up = lab_up(_two('emulator = "wire"'))
    state = find(up.name)
    assert state is not None
    (proc,) = state.processes
    # Deleting node b's namespace destroys the veth pair into the wire.
    run = subprocess.run(["ip", "netns", "del", up.ns("b")], capture_output=True, check=False)
    assert run.returncode == 0
    deadline = time.monotonic() + 3
    while proc.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not proc.alive()
    log = tmp_stats(up.name).with_suffix(".log").read_text()
    assert "went away" in log, log

