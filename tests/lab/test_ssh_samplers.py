"""Sampling devices over SSH, their facts and their clocks, against the emulated
devices: an OpenWrt-like one (BusyBox ash, no tc) and a Linux board (tc)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable

import pytest

from hoplab.nodes import clock
from hoplab.nodes.ssh_counters import COST_SERIES, WHY, DeviceCounterSource
from hoplab.nodes.ssh_exec import SshExecutor
from hoplab.record import Series
from hoplab.samplers.runner import Samplers, Target
from hoplab.tools.tc import parse_tc_json
from tests.helpers.devices import Device, Farm, Kind

pytestmark = pytest.mark.root
# A UDP datagram of 1000 payload bytes on a veth: + 8 UDP + 20 IPv4 + 14 Ethernet.
PAYLOAD = 1000
FRAME = PAYLOAD + 8 + 20 + 14


def _sample(ex: SshExecutor, seconds: float, kinds: frozenset[str],
            during: Callable[[], object] | None = None) -> tuple[list[Series], Samplers]:
    """Sample for `seconds`, or while `during` runs and until a sample begun after it
    has come (start() returns with a first sample, from before it)."""
    zero = time.time()
    s = Samplers([Target("r1", ex, kinds)], cpu=False, clock_zero=zero, interval_s=0.1)
    with s:
        if during is not None:
            during()
            assert s.sampled_since(time.time() - zero, 10)
        else:
            time.sleep(seconds)
    series = s.stop()
    assert not s.errors, s.errors
    return series, s


def _one(series: list[Series], name: str, key: str | None = None) -> Series:
    found = [x for x in series if x.name == name and (key is None or x.key == key)]
    assert len(found) == 1, (name, key, sorted({(x.name, x.key) for x in series}))
    return found[0]


def test_cpu_at_10hz_without_gaps_and_cost_within_budget(ex: SshExecutor, dev: Device) -> None:
    series, s = _sample(ex, 4.0, frozenset({"ifaces", "tcp", "qdisc"}))
    cpu_all = _one(series, "cpu.idle", "all")
    gaps = [b - a for a, b in zip(cpu_all.t, cpu_all.t[1:], strict=False)]
    rate = (len(cpu_all.t) - 1) / (cpu_all.t[-1] - cpu_all.t[0])
    # A tick is skipped while a sample is slow; a sample is a round trip through ssh,
    # the device's SSH server and its awk, each of which waits for a core on a loaded
    # machine. 28 runs on the 2-core machine loaded by two busy loops and other users:
    # 7.0 to 10.1 Hz, the longest gap 0.13 to 0.88 s (3 over 0.5 s).
    assert rate >= 6.5, rate
    assert max(gaps) <= 1.0, max(gaps)
    # Per core too: the device's own /proc/stat rows.
    assert {x.key for x in series if x.name == "cpu.softirq"} >= {"all", "cpu0"}
    # The sampler's own cost on the device, measured there: at most 2 % of one core.
    cost = _one(series, COST_SERIES[0])
    assert cost.unit == "%"
    mean = sum(cost.v) / len(cost.v)
    assert 0 < mean <= 2.0, mean
    # TCP counters (the emulated devices keep /proc/net/snmp).
    assert _one(series, "tcp.retrans_segs").v
    if dev.kind == "openwrt-like":
        assert f"r1: qdisc: {WHY['tc']}" in s.missing
        assert not [x for x in series if x.name.startswith("qdisc.")]
    else:
        assert not s.missing


def test_the_sessions_tc_on_a_linux_board_leaves_nothing(device_farm: Farm) -> None:
    """The board's qdiscs read by one tc for the session (tc-batch), through FIFOs whose
    names are gone once open; the sampler's end ends that tc on the device."""
    dev = device_farm.shared("linux-board")
    look = SshExecutor(dev.target("r1"))
    try:
        source = DeviceCounterSource(SshExecutor(dev.target("r1")), frozenset({"qdisc"}))
        try:
            assert source.tc == "tc-batch"
            snap = source.read()
            assert snap.qdiscs is not None and "qdisc" not in snap.missing
            pid = source.tc_pid
            assert pid is not None
            # What a tc of its own reads there (the board's veth: noqueue, not kept).
            own = parse_tc_json(look.run(["tc", "-s", "-j", "qdisc", "show"]).stdout)
            assert [(q.dev, q.kind) for q in snap.qdiscs] == [(q.dev, q.kind) for q in own]
            fifo = look.run(["readlink", f"/proc/{pid}/fd/0"]).stdout.strip()
            assert fifo.startswith("/tmp/hoplab-tc.") and fifo.endswith("/i (deleted)"), fifo
            assert look.run(["test", "-e", fifo.rsplit("/", 1)[0]]).returncode
        finally:
            source.close()
        # The loop ends when its session does; its tc at its end of input (bounded by
        # the 5 s a sample may take, as the sampler's own wait is).
        gone = ('for i in $(seq 50); do s=$(cat /proc/$0/stat 2>/dev/null) || exit 0; '
                'case ${s#*) } in Z*) exit 0;; esac; sleep 0.1; done; exit 1')
        assert look.run(["sh", "-c", gone, str(pid)]).returncode == 0
    finally:
        look.close()


def test_byte_counts_agree_with_a_known_transfer(ex: SshExecutor, dev: Device,
                                                 tmp_path: object) -> None:
    """10,000 datagrams of 1000 bytes into the device: its rx counter, sampled over SSH,
    grows by 1042 bytes each (within 0.5 %, less than one header's 14-byte slip)."""
    from pathlib import Path
    tmp = Path(str(tmp_path))
    server = ex.start("iperf3-s", ["iperf3", "-s", "-1", "-p", "5299"], out=tmp / "s.out",
                      err=tmp / "s.err")
    deadline = time.monotonic() + 10
    while not subprocess.run(["ip", "netns", "exec", dev.netns, "ss", "-Hlnt",
                              "sport = :5299"], capture_output=True, text=True,
                             check=True).stdout.strip():
        assert server.poll() is None and time.monotonic() < deadline, "iperf3 -s not up"
        time.sleep(0.02)
    result: dict[str, object] = {}

    def transfer() -> None:
        res = subprocess.run(["iperf3", "-c", dev.address, "-p", "5299", "-u", "-b", "40M",
                              "-l", str(PAYLOAD), "-t", "2", "-J"], capture_output=True,
                             text=True, timeout=30, check=True)
        result.update(json.loads(res.stdout))

    try:
        series, _ = _sample(ex, 0, frozenset({"ifaces"}), during=transfer)
    finally:
        ex.stop(server)
    end = result["end"]
    assert isinstance(end, dict)
    # Every datagram sent reaches the device's interface; those its iperf3 did not read
    # in time are lost to the socket, after the counter (so: sent, not received).
    sent = end["sum"]["packets"]
    assert sent > 8000
    rx = _one(series, "iface.rx_bytes", dev.netns + "d")
    got = rx.v[-1] - rx.v[0]
    expected = sent * FRAME
    assert abs(got - expected) / expected < 0.005, (got, expected)


def test_facts_openwrt_like(device_farm: Farm) -> None:
    dev = device_farm.shared("openwrt-like")
    e = SshExecutor(dev.target("r1"))
    try:
        f = e.facts()
    finally:
        e.close()
    assert f.values["model"] == "hoplab emulated openwrt-like"
    assert f.values["firmware"].startswith("OpenWrt 23.05.5")
    assert f.values["cpus"] >= 1 and f.values["kernel"]
    assert f.values["tools"]["iperf3"].startswith("iperf 3.")
    assert "tc-full (or tc-tiny)" in f.missing["qdiscs"]
    assert "ethtool" in f.missing["offloads"]
    assert "perf" in f.missing["tool perf"]
    assert f.values["interfaces"] == [dev.netns + "d"]


def test_facts_linux_board(device_farm: Farm) -> None:
    dev = device_farm.shared("linux-board")
    e = SshExecutor(dev.target("r1"))
    try:
        f = e.facts()
    finally:
        e.close()
    ifname = dev.netns + "d"
    assert f.values["firmware"].startswith("Debian GNU/Linux")
    assert f.values["drivers"][ifname]["driver"] == "veth"
    assert f.values["offloads"][ifname]["generic-receive-offload"] in ("on", "off")
    assert f.values["tools"]["perf"].startswith("perf version")
    assert f.values["qdiscs"] == []     # a veth's noqueue is skipped
    assert "model" in f.missing


@pytest.mark.parametrize("kind,method", [("openwrt-like", "seconds-edge"),
                                         ("openwrt-like", "adjtimex"),
                                         ("linux-board", "epochrealtime"),
                                         ("linux-board", "date-ns")])
def test_clock_offset_with_uncertainty(device_farm: Farm, kind: Kind, method: str) -> None:
    """The emulated devices share this machine's clock: the true offset is 0, so it must
    lie within the reported uncertainty; the OpenWrt-like device's BusyBox has no %N,
    so its clock is read by the seconds' edge unless adjtimex is asked for; the Linux
    board's bash tells $EPOCHREALTIME, and its date +%s.%N where that is asked for."""
    dev = device_farm.shared(kind)
    e = SshExecutor(dev.target("r1"))
    try:
        if method not in ("adjtimex", "date-ns"):    # the ones asked for
            assert clock._method(e) == method
        got = clock.estimate(e, method=method)
    finally:
        e.close()
    assert got.method == method
    assert abs(got.offset_s) <= got.uncertainty_s, got
    assert got.uncertainty_s < (0.02 if method == "seconds-edge" else 0.005), got
    assert got.as_metadata()["uncertainty_s"] == got.uncertainty_s


def test_what_a_small_flash_image_lacks_is_missing_not_zero(device_farm: Farm) -> None:
    """As on an image without /proc/net/snmp and /proc/net/netstat (the test names files
    the device does not have in their place)."""
    dev = device_farm.shared("openwrt-like")
    src = DeviceCounterSource(SshExecutor(dev.target("r1")), frozenset({"ifaces", "tcp", "qdisc"}),
                              files={"snmp": "/proc/net/snmp-stripped",
                                     "netstat": "/proc/net/netstat-stripped"})
    try:
        snap = src.read()
    finally:
        src.close()
    assert snap.snmp is None and snap.netstat is None and snap.qdiscs is None
    assert snap.missing == {"tcp": WHY["snmp"], "tcp.lost_retransmit": WHY["netstat"],
                            "qdisc": WHY["tc"]}
    assert snap.net_dev is not None and snap.proc_stat is not None


def test_sampler_of_a_device_that_goes_away_fails_at_once(device_farm: Farm) -> None:
    from hoplab.nodes.executor import ExecutorError
    dev = device_farm.add("openwrt-like")
    src = DeviceCounterSource(SshExecutor(dev.target("r1")), frozenset({"ifaces"}))
    try:
        assert src.read().net_dev is not None
        dev.kill_ssh()
        t = time.monotonic()
        with pytest.raises(ExecutorError, match="node r1"):
            for _ in range(3):
                src.read()
        assert time.monotonic() - t < 5
    finally:
        src.close()
        dev.kill_server()
