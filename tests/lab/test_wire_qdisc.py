"""Known answers of the wire's queue disciplines (docs/wire.md), on this kernel,
which has no fq_codel, codel or sfq: `qdisc = "..."` on a link gets the wire's.

Seed 004's uplink: hosts ha and hb behind router r, whose link to srv is the
20 Mbit/s bottleneck (r -> srv is the links[2] forward direction).

- FIFO of 1000 packets, three bulk TCP uploads + a 25 Mbit/s UDP flood from ha,
  ping from hb: the ping waits for the full queue (1000 x 1514 B at 20 Mbit/s =
  606 ms): median RTT above 300 ms. The same through fq_codel: below 15 ms.
- Three bulk uploads alone through fq_codel: goodput >= 90 % of the payload rate,
  20 Mbit/s x 1448 / 1514 = 19.13 Mbit/s (1514-byte frames carry 1448 bytes).
- codel, with 40 ms of delay each way: the bulk flows' packets wait between half
  and twice the 5 ms target (median, measured by the wire), a tenth of them less
  than the target.
- Host fairness: ha 3 flows, hb 1 flow; keys = "src": 50 % +- 5 % each; 5-tuple:
  hb gets 25 % +- 5 %.
- sfq, perturb = 5: the ping's RTT changes level (its flow shares a slot with a
  flood, or stops sharing) only at the wire's rehashes, on its 5 s grid.
- fq_codel with ECN-capable TCP: CE marks instead of drops.
- codel's ce_threshold: CE marks on exactly the ECT packets that waited longer.
- Tunnel keys (seed 004): inside one VXLAN tunnel, the outer 5-tuple puts a ping
  behind the bulk flows, the inner one gives it its own queue.
- fq_codel at 1 Gbit/s, nothing else: >= 0.9 Gbit/s of TCP.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from hoplab.lab import wire
from hoplab.samplers import wire as wire_samples
from tests.helpers.lab import (
    WIRE_CC,
    LabUp,
    UpLab,
    hoplab,
    iperf3,
    mbit_received,
    namespaces,
    payload_mbit,
    stop,
    wait_listening,
)

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(wire.binary() is None, reason="hoplab-wire is not built")]

PAYLOAD_MBIT = payload_mbit(20)  # 19.13
BOTTLENECK = 2  # links[2]: r <-> srv
_PING = re.compile(r"^\[([\d.]+)\].*icmp_seq=(\d+).*time=([\d.]+) ms", re.M)


def uplink(forward: str, link: str = "", ha: str = "") -> str:
    return ('# qdisc test: seed 004 uplink\nname = "q"\n'
            f"[nodes.ha]\n{ha}\n[nodes.hb]\n[nodes.r]\n[nodes.srv]\n"
            '[[links]]\nbetween = ["ha", "r"]\n[[links]]\nbetween = ["hb", "r"]\n'
            f'[[links]]\nbetween = ["r", "srv"]\n{link}\nforward = {{ {forward} }}\n')


@contextmanager
def servers(up: UpLab, ports: list[int]) -> Iterator[None]:
    procs = [subprocess.Popen(["ip", "netns", "exec", up.ns("srv"), "iperf3", "-s", "-1", "-p",
                               str(p)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, text=True) for p in ports]
    try:
        for p, proc in zip(ports, procs, strict=True):
            wait_listening(up.ns("srv"), p, proc)
        yield
    finally:
        for proc in procs:
            stop(proc)


def client(up: UpLab, node: str, port: int, *args: str,
           target: str = "srv-v4") -> subprocess.Popen[str]:
    cc = [] if "-u" in args else ["-C", WIRE_CC]
    return subprocess.Popen(["ip", "netns", "exec", up.ns(node), "iperf3", "-c", target, "-p",
                             str(port), "-J", *cc, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen[str], timeout: float = 60) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    data: dict[str, Any] = json.loads(out)
    assert proc.returncode == 0 and "error" not in data, (data.get("error"), err)
    return data


def pinger(up: UpLab, node: str, seconds: float, interval: float = 0.05,
           target: str = "srv-v4", count: int | None = None) -> subprocess.Popen[str]:
    """Pings for `seconds`; with `count`, stops sending after that many and waits for
    their replies until `seconds`."""
    sent = [] if count is None else ["-c", str(count)]
    return subprocess.Popen(["ip", "netns", "exec", up.ns(node), "ping", "-D", "-n", "-i",
                             str(interval), *sent, "-w", str(seconds), target],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def pings(proc: subprocess.Popen[str]) -> list[tuple[float, float]]:
    """(send time, epoch s; RTT, ms) of every answered ping."""
    out, _ = proc.communicate(timeout=60)
    return [(float(t) - float(rtt) / 1e3, float(rtt)) for t, _, rtt in _PING.findall(out)]


def loaded_ping_median(up: UpLab) -> float:
    """Seed 004's rows 3 and 5 at once: three uploads and a 25 Mbit/s flood from ha,
    pings from hb; the median RTT once the load has run for 2 s."""
    with ExitStack() as stack:
        stack.enter_context(servers(up, [5201, 5202]))
        # Fixed source ports, as in tunnelled_ping_median: the ping's fq_codel bucket
        # is then not one of the load's (790 against 754, 647, 474 and 78).
        bulk = client(up, "ha", 5201, "-P", "3", "--cport", "41000", "-t", "7")
        flood = client(up, "ha", 5202, "-u", "-b", "25M", "-l", "1400", "--cport", "42000",
                       "-t", "7")
        time.sleep(2)
        # 80 pings over 4 s, then 1 s more for the last ones' replies: behind a full
        # 606 ms FIFO, a deadline of 4 s lost the last 12 to the clock, not the queue.
        ping = pinger(up, "hb", 5, count=80)
        rtts = [r for _, r in pings(ping)]
        result(bulk)
        result(flood)
    # The tail-drop FIFO the flood keeps full drops pings: 51 to 61 of 80 answered
    # here, and CI once saw 16 of the first 68 under load. A median of 10 still says
    # where the queue sits.
    assert len(rtts) >= 10, rtts
    return statistics.median(rtts)


def test_fifo_1000_packets_bloats(lab_up: LabUp) -> None:
    up = lab_up(uplink('rate = "20mbit", queue = "1000p"', 'emulator = "wire"'))
    median = loaded_ping_median(up)
    # A full queue is 606 ms; the flood keeps it near full.
    assert median > 300, median


def test_fq_codel_keeps_ping_low_under_the_same_load(lab_up: LabUp) -> None:
    up = lab_up(uplink('rate = "20mbit", queue = "1000p", qdisc = "fq_codel"'))
    assert up.result.plan is not None
    median = loaded_ping_median(up)
    assert median < 15, median


# Alone: CoDel keeps 5 ms queued, so a stall of the hosts longer than that idles the
# link; beside the pool's other tests its goodput read 16.34 against 19.13 (6f0474b's
# fresh-clone run, nothing stolen).
@pytest.mark.alone
def test_fq_codel_bulk_goodput(lab_up: LabUp) -> None:
    up = lab_up(uplink('rate = "20mbit", qdisc = "fq_codel"'))
    with servers(up, [5201]):
        data = result(client(up, "ha", 5201, "-P", "3", "-t", "6", "-O", "1"))
    goodput = mbit_received(data)
    assert goodput >= 0.9 * PAYLOAD_MBIT, (goodput, PAYLOAD_MBIT)
    assert goodput <= 1.01 * PAYLOAD_MBIT, (goodput, PAYLOAD_MBIT)


def test_codel_sojourn_near_target(lab_up: LabUp) -> None:
    # A path of 80 ms RTT (40 ms each way): CoDel's interval (100 ms) is set for the
    # RTTs it controls. A standing queue needs a load that persists through CoDel's
    # drops: eight cubic flows (one drop halves one flow's window, an eighth of the
    # load); with 3 the queue empties after each drop (median 1.2-2.9 ms, the link idle
    # meanwhile). The flows' sawtooth moves the median from one 6 s window to the next:
    # 4.7-7.8 ms in 18 windows (10 beside a busy loop), mean 6.1, sd 0.85; a 4 s window
    # read 4.0-8.4 (8.4 in a CI run, past the 5 +- 3 this test once asked). So the
    # bounds are half and twice the target, over 4 sd from the mean: a CoDel that never
    # drops queues hundreds of ms, one whose target were read in us queues none. What
    # CoDel promises is the queue falling below target within each interval: the
    # fastest tenth of the packets waited less than target (1.0-3.1 ms measured).
    up = lab_up(uplink('rate = "20mbit", qdisc = "codel"', 'delay = "40ms"'))
    path = wire_samples.stats_path(wire.netns_name(up.name, BOTTLENECK))
    with servers(up, [5201]):
        bulk = client(up, "ha", 5201, "-P", "8", "-t", "10")
        time.sleep(3)  # past slow start: CoDel's control loop has settled
        before = wire.read_stats(path)
        time.sleep(6)
        after = wire.read_stats(path)
        result(bulk)
    assert before is not None and after is not None
    hists = before["forward"]["sojourn_hist"], after["forward"]["sojourn_hist"]
    median = wire_samples.sojourn_quantile(*hists, 0.5)
    fastest = wire_samples.sojourn_quantile(*hists, 0.1)
    target = 5
    assert median is not None and target / 2 <= median <= 2 * target, median
    assert fastest is not None and fastest < target, fastest
    assert after["forward"]["dropped_aqm"] + after["forward"]["ecn_marked"] > 0


def host_shares(up: UpLab) -> tuple[float, float]:
    with servers(up, [5201, 5202]):
        # Fixed source ports: hb's flow never shares a bucket with one of ha's (697
        # against 754, 647 and 474; see tunnelled_ping_median).
        a = client(up, "ha", 5201, "-P", "3", "--cport", "41000", "-t", "6", "-O", "1")
        b = client(up, "hb", 5202, "--cport", "43000", "-t", "6", "-O", "1")
        ra, rb = mbit_received(result(a)), mbit_received(result(b))
    return ra / (ra + rb), rb / (ra + rb)


def test_host_fairness_with_src_key(lab_up: LabUp) -> None:
    up = lab_up(uplink('rate = "20mbit", qdisc = "fq_codel", qdisc_options = { keys = "src" }'))
    a, b = host_shares(up)
    assert abs(a - 0.5) <= 0.05 and abs(b - 0.5) <= 0.05, (a, b)


def test_flow_fairness_with_the_5_tuple(lab_up: LabUp) -> None:
    up = lab_up(uplink('rate = "20mbit", qdisc = "fq_codel"'))
    _, b = host_shares(up)
    assert abs(b - 0.25) <= 0.05, b


# Alone: a change of level 1.2 s after the rehash it follows, beside the unit tests at the
# same priority (3ddbf44), beside them capped at half a core (0739ea7) and beside the
# qos-under-load example's wire and browser (3fda4f9), against 0.2 s; never alone.
@pytest.mark.alone
def test_sfq_perturb_moves_latency_on_its_grid(lab_up: LabUp) -> None:
    # Four slots' worth of hash buckets and two floods with fixed source ports: the
    # ping's flow shares a flood's slot in some perturbation intervals (hundreds of
    # ms behind that flood's queue) and not in others (a few ms). Addresses, ports and
    # the wire's seed are fixed, so which intervals collide is the same every run: the
    # second and third (5-15 s after the wire starts; the pings run from about 3 s to 18
    # s), so both changes of level fall inside the pings.
    up = lab_up(uplink('rate = "10mbit", qdisc = "sfq", '
                       'qdisc_options = { perturb = "5s", divisor = 4 }'))
    path = wire_samples.stats_path(wire.netns_name(up.name, BOTTLENECK))
    stats = wire.read_stats(path)
    assert stats is not None
    # The wire's clock is CLOCK_MONOTONIC; ping -D stamps wall-clock time.
    origin = stats["started"] + (time.time() - time.monotonic())
    with servers(up, [5201, 5202]):
        floods = [client(up, "ha", port, "-u", "-b", "8M", "-l", "1400", "-t", "18",
                         "--cport", str(40000 + port)) for port in (5201, 5202)]
        time.sleep(2)  # the floods' queues are full
        series = pings(pinger(up, "hb", 15))
        for f in floods:
            result(f)
    after = wire.read_stats(path)
    # Rehashed at 5, 10 and 15 s at least (the floods run until about 20 s).
    assert after is not None and after["forward"]["rehashes"] >= 3
    high = [rtt > 50 for _, rtt in series]
    assert any(high) and not all(high), "no collision in 15 s: change divisor or ports"
    # A change of level that holds for the next 5 pings (a quarter second): a ping
    # near the threshold is not a change.
    changes = [(series[i][0], series[i + 1][0]) for i in range(len(series) - 6)
               if high[i] != high[i + 1] and len(set(high[i + 1:i + 6])) == 1]
    assert changes
    for t0, t1 in changes:
        # The grid point falls between the two pings' sends, within 0.2 s (a ping
        # sent just before a rehash is moved with its flow's queue).
        k = round((t1 - origin) / 5)
        grid = origin + 5 * k
        assert t0 - 0.2 <= grid <= t1 + 0.2, (t0 - origin, t1 - origin, changes)


def test_fq_codel_marks_ecn_capable_flows_instead_of_dropping(lab_up: LabUp) -> None:
    # ha's TCP asks for ECN (tcp_ecn = 1; srv accepts it by default): fq_codel marks
    # CE where it would drop, so its queue stays short without losing packets.
    up = lab_up(uplink('rate = "20mbit", qdisc = "fq_codel"', 'delay = "10ms"',
                       'sysctls = { "net.ipv4.tcp_ecn" = 1 }'))
    path = wire_samples.stats_path(wire.netns_name(up.name, BOTTLENECK))
    with servers(up, [5201]):
        data = result(client(up, "ha", 5201, "-P", "3", "-t", "5"))
    stats = wire.read_stats(path)
    assert stats is not None
    fwd = stats["forward"]
    assert fwd["ecn_marked"] >= 20, fwd
    assert fwd["dropped_aqm"] <= fwd["ecn_marked"] / 10, fwd
    assert data["end"]["sum_sent"]["retransmits"] <= fwd["dropped_aqm"] + 5, data["end"]


def vxlan(up: UpLab, node: str, peer: str, addr: str) -> None:
    """A VXLAN tunnel from node to peer whose packets all leave from one UDP port, so
    every flow inside it is one flow outside (as seed 004's IP-in-IP tunnels were;
    this kernel has no ipip module)."""
    local, remote = (str(up.plan.node(n).primary4) for n in (node, peer))
    for argv in (["ip", "link", "add", "vx0", "mtu", "1450", "type", "vxlan", "id", "42",
                  "dstport", "4789", "srcport", "4789", "4790", "local", local, "remote",
                  remote],
                 ["ip", "addr", "add", addr, "dev", "vx0"], ["ip", "link", "set", "vx0", "up"]):
        done = up.run(node, *argv)
        assert done.returncode == 0, (argv, done.stderr)


def tunnelled_ping_median(keys: str, lab_up: LabUp) -> float:
    # A long CoDel target makes a shared queue obvious: ~50 ms behind the bulk flows.
    up = lab_up(uplink(f'rate = "20mbit", qdisc = "fq_codel", qdisc_options = {{ keys = '
                       f'"{keys}", target = "50ms", interval = "500ms" }}'))
    vxlan(up, "ha", "srv", "192.168.77.1/24")
    vxlan(up, "srv", "ha", "192.168.77.2/24")
    # Fixed source ports (iperf3 gives the streams 41000-41002): with ephemeral ones,
    # one run in about 340 hashed a bulk flow into the ping's bucket of 1024, and the
    # ping read ~50 ms with the tunnel keys too (a CI run: 52.6). The wire's fq_codel
    # hash is unsalted (SipHash-1-3, keys 0), so fixed ports fix the buckets: the
    # ping's 15 against 543, 325 and 702. --cport 33101 puts a stream in the ping's
    # bucket, and the test then fails with 52.3 ms.
    with servers(up, [5201]):
        bulk = client(up, "ha", 5201, "-P", "3", "--cport", "41000", "-t", "6",
                      target="192.168.77.2")
        time.sleep(2)
        rtts = [r for _, r in pings(pinger(up, "ha", 3, target="192.168.77.2"))]
        result(bulk)
    assert len(rtts) >= 20, rtts
    return statistics.median(rtts)


def test_tunnel_keys_see_flows_inside_a_tunnel(lab_up: LabUp) -> None:
    outer = tunnelled_ping_median("5-tuple", lab_up)
    inner = tunnelled_ping_median("5-tuple,tunnel-5-tuple", lab_up)
    assert outer > 20, outer
    assert inner < 5, inner


# Alone: how fast the wire forwards is this machine's CPU's answer. Beside another test
# it carried 801 Mbit/s (the unit tests at nice 19) and 686.7 (test_throughput_rfc's
# back-to-back frames) against 900 (docs/testing.md); alone, with both cores running a
# busy loop, 952 to 956. Once alone it carried 714.7, minutes before a run in which this
# machine's hypervisor took up to 0.75 of a core (tests/helpers/steal.py runs a test
# that failed so again).
@pytest.mark.alone
def test_fq_codel_at_1gbit_is_not_the_bottleneck(lab_up: LabUp) -> None:
    up = lab_up(uplink('rate = "1gbit", qdisc = "fq_codel"'))
    # Two streams keep the pipe full through the scheduling hiccups of a busy 2-core
    # machine; the rate counts frames, so at most 1000 x 1448 / 1514 = 956 Mbit/s.
    data = iperf3(up.ns("srv"), up.ns("ha"), "srv-v4", "-C", WIRE_CC, "-P", "2", "-O", "1",
                  seconds=4)
    assert mbit_received(data) >= 900, mbit_received(data)


def test_what_neither_can_give_fails_before_anything_is_built(tmp_path: Path,
                                                              lab_name: str) -> None:
    f = tmp_path / "cake.toml"
    f.write_text(uplink('rate = "20mbit", qdisc = "cake"'))
    out = hoplab("lab", "up", str(f), "--name", lab_name)
    assert out.returncode == 2, out.stderr
    assert 'links[2] (r <-> srv): qdisc = "cake" needs the cake qdisc' in out.stderr
    line = f.read_text().splitlines().index('forward = { rate = "20mbit", qdisc = "cake" }') + 1
    assert f"({f}:{line}: links[2].forward.qdisc)" in out.stderr, out.stderr
    assert not [ns for ns in namespaces() if lab_name in ns]


def test_ce_threshold_marks_exactly_the_packets_that_waited_longer(lab_up: LabUp) -> None:
    # codel's ce_threshold (Linux's, for DCTCP-style senders) marks CE on every
    # ECN-capable packet that leaves after waiting longer than it, whatever the control
    # law does. The control law is kept quiet here (target 50 ms; ecn off, so it could
    # only drop), ha's upload is ECN-capable cubic. The wire's sojourn histogram (0.1 ms
    # buckets, an edge at 2 ms) counts every packet, and Linux sends SYNs, FINs, pure
    # ACKs and retransmissions Not-ECT (11 here): so the marks are the packets above 2 ms
    # less at most the Not-ECT packets ha sent, which an nftables counter in ha counts.
    up = lab_up(uplink('rate = "20mbit", qdisc = "codel", qdisc_options = { ce_threshold = '
                       '"2ms", target = "50ms", interval = "500ms", ecn = false }',
                       ha='sysctls = { "net.ipv4.tcp_ecn" = 1 }'))
    path = wire_samples.stats_path(wire.netns_name(up.name, BOTTLENECK))
    nft = ["ip", "netns", "exec", up.ns("ha"), "nft"]
    subprocess.run([*nft, "add table ip ect; add chain ip ect out { type filter hook output "
                    "priority 0; }; add rule ip ect out ip ecn not-ect counter"], check=True)
    with servers(up, [5201]):
        result(client(up, "ha", 5201, "-t", "2"))
        time.sleep(2 * wire.STATS_INTERVAL_S)
    listed = subprocess.run([*nft, "-j", "list", "table", "ip", "ect"], check=True,
                            capture_output=True, text=True).stdout
    not_ect = next(e["rule"]["expr"][-1]["counter"]["packets"]
                   for e in json.loads(listed)["nftables"] if "rule" in e)
    after = wire.read_stats(path)
    assert after is not None
    fwd = after["forward"]
    above = sum(fwd["sojourn_hist"][20:])  # buckets from 2.0 ms up
    assert fwd["ecn_marked"] == 0 and fwd["dropped_aqm"] == 0, fwd
    assert above >= 50, fwd
    assert 0 <= above - fwd["ce_marked"] <= not_ect, (fwd["ce_marked"], above, not_ect)
