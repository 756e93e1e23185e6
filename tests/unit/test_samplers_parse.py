"""Sampler parsers on outputs captured from a real lab (see tests/data/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.samplers.cpu import CpuTimes, parse_proc_stat, shares
from hoplab.samplers.ifaces import IfaceCounters, parse_net_dev
from hoplab.samplers.tcp import parse_snmp, tcp_counters
from hoplab.tools.tc import QdiscStats, format_handle, parse_tc_json

DATA = Path(__file__).resolve().parents[1] / "data"


def text(*parts: str) -> str:
    return DATA.joinpath(*parts).read_text()


def test_proc_stat_folds_columns() -> None:
    rows = parse_proc_stat(text("proc", "stat-tcp-load.txt"))
    assert sorted(rows) == ["all", "cpu0", "cpu1"]
    # cpu  123169 0 112153 490232 2103 0 188479 65 0 0
    assert rows["all"] == CpuTimes(user=123169, system=112153, irq=0, softirq=188479,
                                   idle=490232 + 2103, steal=65)
    # cpu0 49540 0 56685 257747 1002 0 92845 27 0 0
    assert rows["cpu0"] == CpuTimes(user=49540, system=56685, irq=0, softirq=92845,
                                    idle=257747 + 1002, steal=27)
    assert rows["cpu1"].user == 73629


def test_cpu_shares_of_an_interval() -> None:
    before = CpuTimes(user=100, system=50, irq=0, softirq=10, idle=800, steal=0)
    after = CpuTimes(user=110, system=55, irq=1, softirq=30, idle=863, steal=1)
    got = shares(before, after)
    assert got is not None
    assert got == pytest.approx({"user": 10.0, "system": 5.0, "irq": 1.0, "softirq": 20.0,
                                 "idle": 63.0, "steal": 1.0})
    assert sum(got.values()) == pytest.approx(100.0)
    assert shares(after, after) is None


def test_proc_stat_with_fewer_columns() -> None:
    rows = parse_proc_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\nintr 5\n")
    assert rows["all"] == CpuTimes(user=3, system=3, irq=0, softirq=0, idle=4, steal=0)


def test_net_dev_read_inside_a_namespace() -> None:
    got = parse_net_dev(text("proc", "net-dev-r1-tcp-load.txt"))
    assert sorted(got) == ["eth0", "eth1"]  # lo is left out
    assert got["eth0"] == IfaceCounters(rx_bytes=12139507, rx_packets=567, rx_errors=0,
                                        rx_drops=0, tx_bytes=42704, tx_packets=642,
                                        tx_errors=0, tx_drops=0)
    assert got["eth1"].tx_bytes == 12139687
    assert got["eth1"].tx_packets == 567
    assert got["eth1"].rx_bytes == 42684


def test_snmp_sections() -> None:
    snmp = parse_snmp(text("proc", "net-snmp-client-tcp-load.txt"))
    assert snmp["Tcp"]["OutSegs"] == 8386
    assert snmp["Tcp"]["RetransSegs"] == 0
    assert snmp["Tcp"]["MaxConn"] == -1
    assert parse_snmp(text("proc", "net-snmp-host.txt"))["Tcp"]["RetransSegs"] == 289


def test_tcp_counters_with_netstat() -> None:
    got = tcp_counters(text("proc", "net-snmp-host.txt"),
                       text("proc", "net-netstat-client-tcp-load.txt"))
    assert got == {"tcp.retrans_segs": 289, "tcp.lost_retransmit": 0}
    assert tcp_counters(text("proc", "net-snmp-host.txt"), None) == {"tcp.retrans_segs": 289}


def test_snmp_mismatched_lines() -> None:
    with pytest.raises(ValueError, match="header"):
        parse_snmp("Ip: A B\nTcp: 1 2\n")


def test_tc_htb_pfifo_under_udp_flood() -> None:
    got = parse_tc_json(text("tc", "r1-htb-pfifo-udp-flood.json"))
    # lo and eth0 only have noqueue and are left out.
    assert [q.key for q in got] == ["eth1 1: htb", "eth1 10: pfifo"]
    htb, fifo = got
    assert htb == QdiscStats(dev="eth1", handle="1:", kind="htb", parent=None,
                             sent_bytes=44019803, sent_packets=29303, drops=25357,
                             overlimits=12641, requeues=0, backlog_bytes=1488510,
                             backlog_packets=999)
    assert fifo.parent == "1:1"
    assert (fifo.drops, fifo.overlimits, fifo.backlog_packets) == (25357, 0, 999)


def test_tc_htb_under_tcp_load() -> None:
    htb = parse_tc_json(text("tc", "r1-htb-pfifo-tcp-load.json"))[0]
    assert (htb.sent_bytes, htb.sent_packets, htb.drops, htb.overlimits) == (
        12572977, 8318, 0, 17)


def test_tc_tbf_under_load() -> None:
    flood = {q.key: q for q in parse_tc_json(text("tc", "r2-htb-tbf-udp-flood.json"))}
    assert set(flood) == {"eth0 1: htb", "eth0 10: pfifo", "eth1 1: tbf"}
    tbf = flood["eth1 1: tbf"]
    assert (tbf.sent_bytes, tbf.sent_packets, tbf.drops, tbf.overlimits) == (
        34676013, 23032, 6172, 28671)
    assert (tbf.backlog_bytes, tbf.backlog_packets) == (311410, 209)
    tcp = {q.key: q for q in parse_tc_json(text("tc", "r2-htb-tbf-tcp-load.json"))}
    assert tcp["eth1 1: tbf"].backlog_bytes == 54504
    assert tcp["eth0 1: htb"].sent_bytes == 42488


def test_tc_idle_after_load_keeps_counts() -> None:
    htb = parse_tc_json(text("tc", "r1-htb-pfifo-idle.json"))[0]
    assert (htb.drops, htb.backlog_bytes, htb.backlog_packets) == (51476, 0, 0)


@pytest.mark.parametrize(("handle", "text_"), [
    (0x10000, "1:"), (0x100000, "10:"), (0x10001, "1:1"), (0x80010000, "8001:"),
    (0xFFFFFFFF, "root"),
])
def test_format_handle(handle: int, text_: str) -> None:
    assert format_handle(handle) == text_
