"""`ss -tinH` parsed from real captures (tests/data/ss): a cubic flow through 20 Mbit/s HTB
with a 200-packet pfifo, and iperf3's bbr control connection beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.tools import ToolOutputError, ss

DATA = Path(__file__).resolve().parents[1] / "data" / "ss"


def test_control_and_data_connections():
    control, data = ss.parse((DATA / "bbr-control-and-cubic-data.txt").read_text())
    assert control.congestion == "bbr" and data.congestion == "cubic"
    assert (data.local, data.peer, data.peer_port) == ("10.98.0.1:48972", "10.98.0.2:5201", 5201)
    assert data.cwnd == 235 and data.mss == 1448
    assert data.srtt_ms == pytest.approx(55.722) and data.rttvar_ms == pytest.approx(2.518)
    assert data.min_rtt_ms == pytest.approx(0.007)
    assert data.delivery_rate_bps == 17_010_272 and data.pacing_rate_bps == 97_707_248
    assert (data.bytes_sent, data.bytes_acked, data.notsent) == (3_908_189, 3_777_870, 864_456)
    # No retransmission yet: unknown fields stay None, never 0.
    assert data.bytes_retrans is None and data.retrans_total is None
    assert control.delivery_rate_bps == 437_132_072


def test_two_flows_by_their_client_ports():
    socks = ss.parse((DATA / "cubic-2flows-20mbit-htb-pfifo200-later.txt").read_text())
    # iperf3's control connection (an ephemeral port, bbr here) beside the two flows.
    assert sorted(s.local_port for s in socks)[:2] == [50001, 50002] and len(socks) == 3
    flows = [s for s in socks if s.local_port in (50001, 50002)]
    assert all(s.congestion == "cubic" for s in flows)
    assert all(s.srtt_ms is not None and s.srtt_ms > 100 for s in flows)


def test_a_broken_line_is_an_error():
    with pytest.raises(ToolOutputError):
        ss.parse("0 0\n\t cubic cwnd:10 delivery_rate 12xbps\n")


def test_argv_selects_established_sockets_to_a_peer():
    assert ss.argv("10.0.0.2") == ["ss", "-tinH", "state", "established", "dst", "10.0.0.2"]
