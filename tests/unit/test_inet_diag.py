"""tcp_info over netlink (hoplab.tools.inet_diag) from real captured dumps
(tests/data/inet_diag), against `ss -tinH` taken a moment later in the same namespace,
and the tcp_info sampler's choice of each flow's data socket among them."""

from __future__ import annotations

import socket
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from hoplab.samplers import tcp_info
from hoplab.tools import ToolOutputError, inet_diag, ss

DATA = Path(__file__).resolve().parents[1] / "data" / "inet_diag"
UP = "cubic-up-20mbit-40ms-q200-client"
DOWN6 = "cubic-down-ipv6-20mbit-40ms-q200-server"


def dump(name: str) -> list[ss.Socket]:
    data = (DATA / f"{name}.bin").read_bytes()
    assert inet_diag.complete(data)
    return inet_diag.parse(data)


def test_an_upload_on_its_client() -> None:
    control, data = dump(UP)
    assert (control.congestion, data.congestion) == ("bbr", "cubic")
    assert (data.local, data.peer, data.peer_port) == ("10.200.0.1:50001", "10.200.0.6:5201",
                                                       5201)
    # Through 20 Mbit/s with a 40 ms RTT and 200 frames of queue: the queue is full.
    assert data.mss == 1448 and data.cwnd == 227
    assert data.srtt_ms == pytest.approx(133.397) and data.rttvar_ms == pytest.approx(1.488)
    assert data.min_rtt_ms == pytest.approx(40.209)
    assert data.delivery_rate_bps == 19_123_464 and data.pacing_rate_bps == 23_654_680
    assert (data.bytes_sent, data.bytes_acked, data.bytes_retrans, data.retrans_total) == \
        (7_212_525, 6_870_798, 15_928, 11)
    assert data.notsent == 451_776 and data.send_q == 777_576
    # What the kernel counts as 0 is 0 here (ss leaves it out: None there).
    assert (control.bytes_retrans, control.retrans_total) == (0, 0)


def test_the_same_sockets_as_ss_prints_them() -> None:
    for name in (UP, DOWN6):
        got = {(s.local, s.peer): s for s in dump(name)}
        printed = {(s.local, s.peer): s for s in ss.parse((DATA / f"{name}.ss.txt").read_text())}
        assert got.keys() == printed.keys()
        for k, s in printed.items():
            assert (got[k].mss, got[k].congestion, got[k].min_rtt_ms) == \
                (s.mss, s.congestion, s.min_rtt_ms)
    # The idle control connection did not change between the dump and ss: every field.
    ctl = next(s for s in dump(UP) if s.congestion == "bbr")
    (ctl_printed,) = [s for s in ss.parse((DATA / f"{UP}.ss.txt").read_text())
                  if s.congestion == "bbr"]
    assert ctl == replace(ctl_printed, bytes_retrans=0, retrans_total=0, notsent=0)


def test_a_download_over_ipv6_on_its_server() -> None:
    data, control = dump(DOWN6)
    assert data.local == "[fd68:6c61:6200:1::2]:5202" and data.local_port == 5202
    assert data.mss == 1428 and data.cwnd == 202 and control.cwnd == 14
    assert data.delivery_rate_bps == 18_907_896 and data.retrans_total == 14


def test_a_request_for_established_tcp_with_its_info() -> None:
    req = inet_diag.request(socket.AF_INET6, seq=7)
    length, kind, flags, seq = struct.unpack_from("=IHHI", req)
    assert (length, kind, flags, seq) == (len(req), inet_diag.SOCK_DIAG_BY_FAMILY, 0x301, 7)
    family, proto, ext, _pad, states = struct.unpack_from("=BBBBI", req, 16)
    assert (family, proto, states) == (socket.AF_INET6, socket.IPPROTO_TCP, 1 << 1)
    assert ext == (1 << 1) | (1 << 3)    # INET_DIAG_INFO, INET_DIAG_CONG


def test_a_reply_cut_short_is_not_complete_and_a_bad_one_is_an_error() -> None:
    data = (DATA / f"{UP}.bin").read_bytes()
    assert not inet_diag.complete(data[:-20])
    with pytest.raises(ToolOutputError, match="8 bytes"):
        inet_diag.complete(struct.pack("=IHHII", 8, 20, 0, 1, 0))
    err = struct.pack("=IHHIIi", 36, inet_diag.NLMSG_ERROR, 0, 1, 0, -1) + bytes(16)
    assert inet_diag.complete(err)
    with pytest.raises(ToolOutputError, match="answered Operation not permitted"):
        inet_diag.parse(err)


def test_each_flow_gets_its_data_socket_not_iperf3s_control_connection() -> None:
    up = tcp_info.FlowSocket("bulk", 5201, local=False)
    picker = tcp_info.Picker([up, tcp_info.FlowSocket("other", 5299, local=False)])
    control, data = dump(UP)
    # Before the data moved, the control connection alone carried anything: no pick.
    early = replace(data, bytes_sent=37, notsent=0)
    assert list(picker.pick([control, early])) == []
    assert list(picker.pick([control, data])) == [(up, data)]
    # Once chosen, kept: at the end the control connection's report outweighs nothing.
    report = replace(control, bytes_sent=30_000)
    assert list(picker.pick([report, replace(data, bytes_sent=1)])) == \
        [(up, replace(data, bytes_sent=1))]
    assert list(picker.pick([report])) == []
    down = tcp_info.FlowSocket("dl", 5202, local=True)
    picked = list(tcp_info.Picker([down]).pick(dump(DOWN6)))
    assert [(f, s.cwnd) for f, s in picked] == [(down, 202)]
    values = dict(tcp_info.values(picked[0][1]))
    assert values["tcp.srtt"] == pytest.approx(119.451) and values["tcp.cwnd"] == 202
    assert set(values) == tcp_info.NAMES
    # A value the kernel has not got is left out, never 0.
    assert "tcp.delivery_rate" not in dict(tcp_info.values(replace(data,
                                                                   delivery_rate_bps=None)))
