"""iperf3 adapter: argv builder and parser on real iperf3 3.12 captures (tests/data/iperf3)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hoplab.tools import ToolOutputError, iperf3

DATA = Path(__file__).parent.parent / "data" / "iperf3"


def load(name: str) -> iperf3.Result:
    return iperf3.parse((DATA / name).read_text())


def test_client_argv_exact() -> None:
    c = iperf3.Client("10.0.0.2", port=5300, duration_s=3, parallel=4, cport=6000, tos=0x10,
                      congestion="bbr")
    assert iperf3.client_argv(c) == [
        "iperf3", "-c", "10.0.0.2", "-p", "5300", "-J", "-4", "-t", "3", "-i", "0.2",
        "-P", "4", "--cport", "6000", "-C", "bbr", "-S", "16", "--connect-timeout", "3000"]


def test_client_argv_udp_reverse_bytes_ipv6() -> None:
    c = iperf3.Client("fd00::2", bytes=1000000, udp=True, rate_bps=200_000_000, length=1200,
                      reverse=True, ipv6=True, connect_timeout_ms=None, get_server_output=True)
    assert iperf3.client_argv(c) == [
        "iperf3", "-c", "fd00::2", "-p", "5201", "-J", "-6", "-n", "1000000", "-i", "0.2",
        "-u", "-b", "200000000", "-l", "1200", "-R", "--get-server-output"]


@pytest.mark.parametrize("kwargs", [
    {"duration_s": 1, "reverse": True, "bidir": True},
    {"duration_s": 1, "bytes": 10},
    {},
    {"duration_s": 1.5},
    {"duration_s": 1, "parallel": 0},
    {"duration_s": 1, "cport": 65535, "parallel": 2},
])
def test_client_argv_rejects(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"iperf3"):
        iperf3.client_argv(iperf3.Client("127.0.0.1", **kwargs))  # type: ignore[arg-type]


def test_client_argv_rejects_family_mismatch() -> None:
    with pytest.raises(ValueError, match=r"not an IPv6"):
        iperf3.client_argv(iperf3.Client("127.0.0.1", duration_s=1, ipv6=True))


def test_server_argv() -> None:
    assert iperf3.server_argv(5299, bind="10.0.0.1", affinity="1") == [
        "iperf3", "-s", "-1", "-p", "5299", "-J", "-i", "0.2", "-B", "10.0.0.1", "-A", "1"]


def test_tcp_upload() -> None:
    r = load("tcp_upload.json")
    assert (r.version, r.protocol, r.reverse, r.bidir, r.error) == ("3.12", "TCP", False, False,
                                                                    None)
    assert r.start_unix == 1795351143
    [s] = r.streams
    assert (s.id, s.remote_port, s.sender) == (5, 5299, True)
    assert r.sent_bytes == 3301703680 == s.bytes_sent
    assert r.received_bytes == 3290955776 == s.bytes_received
    assert r.retransmits == 53 and r.lost_packets is None
    ends = [i.end for i in s.intervals]
    assert len(ends) == 5
    assert all(abs(b - a - 0.2) < 0.01 for a, b in itertools.pairwise(ends))
    assert s.intervals[0].rtt_s is not None and s.intervals[0].rtt_s < 0.01
    assert r.cpu_host_pct == pytest.approx(84.380, abs=1e-3)
    assert iperf3.throughput_series(r) == {}
    t, v = iperf3.throughput_series(r, received=False)[5]
    assert t == ends and v[0] == s.intervals[0].bits_per_second


def test_tcp_parallel_cport() -> None:
    r = load("tcp_p4_cport.json")
    assert [s.local_port for s in r.streams] == [5400, 5401, 5402, 5403]
    assert r.sent_bytes == sum(s.bytes_sent or 0 for s in r.streams) == 2713190400
    assert r.received_bytes == sum(s.bytes_received or 0 for s in r.streams) == 2680160256
    assert r.retransmits == sum(s.retransmits or 0 for s in r.streams) == 5


def test_tcp_reverse_measured_at_receiver() -> None:
    r = load("tcp_reverse.json")
    assert r.reverse and not r.bidir
    [s] = r.streams
    assert not s.sender and not s.intervals[0].sender
    assert s.intervals[0].retransmits is None  # the receiving client has no TCP sender stats
    assert (r.sent_bytes, r.received_bytes, r.retransmits) == (2070937600, 2069757846, 66)
    assert list(iperf3.throughput_series(r)) == [5]


def test_tcp_bidir() -> None:
    r = load("tcp_bidir.json")
    assert r.bidir and not r.reverse
    assert [(s.id, s.sender) for s in r.streams] == [(5, True), (7, False)]
    assert (r.sent_bytes, r.received_bytes) == (2065694720, 2065694720)
    assert r.bidir_reverse is not None
    assert (r.bidir_reverse.sent_bytes, r.bidir_reverse.received_bytes) == (463994880, 456523776)
    assert r.bidir_reverse.retransmits == 8
    assert r.reverse_received_bps == pytest.approx(3650810201.74)
    assert list(iperf3.throughput_series(r)) == [7]
    assert list(iperf3.throughput_series(r, received=False)) == [5]


def test_udp_upload_loss_is_receiver_side() -> None:
    r = load("udp_200m.json")
    [s] = r.streams
    assert r.protocol == "UDP"
    assert (r.packets, r.lost_packets, r.lost_percent, r.out_of_order) == (20821, 0, 0.0, 0)
    assert r.jitter_s == pytest.approx(8.1205e-6, rel=1e-3)  # sum_sent says 0: sender-side
    assert s.bytes_sent == 20821 * 1200 and s.bytes_received is None
    assert s.intervals[0].packets is not None and s.intervals[0].jitter_s is None


def test_udp_reverse_loss() -> None:
    r = load("udp_reverse.json")
    assert r.reverse and r.lost_packets == 23 and r.packets == 20817
    assert r.received_bytes == (20817 - 23) * 1200 == 24952800
    assert r.sent_bytes == 20817 * 1200
    assert r.lost_percent == pytest.approx(100 * 23 / 20817)
    assert r.streams[0].intervals[0].jitter_s is not None


def test_udp_bidir() -> None:
    r = load("udp_bidir.json")
    assert r.bidir and r.bidir_reverse is not None
    assert (r.packets, r.bidir_reverse.packets) == (10409, 10408)
    assert r.bidir_reverse.received_bytes == 10408 * 1200


def test_bytes_limited_run() -> None:
    r = load("tcp_bytes.json")
    assert r.sent_bytes == 2 * 1024**3
    assert r.streams[0].intervals[-1].end == pytest.approx(0.84, abs=1e-3)  # short last step


def test_server_output_gives_receiver_series() -> None:
    r = load("tcp_p2_server_output.json")
    assert r.server is not None
    assert r.server.received_bytes == r.received_bytes == 2522527404
    assert [s.remote_port for s in r.server.streams] == [s.local_port for s in r.streams]
    series = iperf3.throughput_series(r)
    assert sorted(series) == [s.id for s in r.streams] == [5, 7]
    assert len(series[5][0]) == 5


def test_error_before_start_is_a_result() -> None:
    r = load("error_refused.json")
    assert r.error == "unable to connect to server: Connection refused"
    assert (r.streams, r.protocol, r.sent_bytes, r.start_unix) == ((), "", 0, None)


def test_error_mid_run_keeps_measurements() -> None:
    r = load("error_server_killed.json")
    assert r.error == "the server has terminated"
    assert r.sent_bytes == 3755212800 and r.received_bytes == 0
    assert len(r.streams[0].intervals) == 6


def test_truncated_json_raises() -> None:
    text = (DATA / "tcp_upload.json").read_text()
    with pytest.raises(ToolOutputError, match=r"^iperf3: output is not JSON \(line \d+"):
        iperf3.parse(text[: len(text) // 2])


def test_non_json_and_wrong_json_raise() -> None:
    with pytest.raises(ToolOutputError, match=r"iperf3: output is not JSON .line 1: 'iperf3: "):
        iperf3.parse("iperf3: error - unable to connect\n")
    with pytest.raises(ToolOutputError, match=r"iperf3: .*no 'start'"):
        iperf3.parse('{"foo": 1}')
    with pytest.raises(ToolOutputError, match=r"iperf3: unexpected JSON layout"):
        iperf3.parse('{"start": {}, "intervals": [{"streams": [{"socket": 5}]}]}')
