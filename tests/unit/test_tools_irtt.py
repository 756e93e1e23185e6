"""irtt adapter: argv builder and parser on real irtt 0.9.0 captures (tests/data/irtt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab.tools import ToolOutputError, irtt

DATA = Path(__file__).parent.parent / "data" / "irtt"


def load(name: str) -> irtt.Result:
    return irtt.parse((DATA / name).read_text())


def test_client_argv() -> None:
    assert irtt.client_argv(irtt.Client("10.0.0.2", port=2399, duration_s=2)) == [
        "irtt", "client", "-o", "-", "-Q", "-4", "-i", "20ms", "-l", "172", "-d", "2000ms",
        "10.0.0.2:2399"]
    c = irtt.Client("fd00::2", interval_s=0.0125, dscp=46, hmac="k", ipv6=True)
    assert irtt.client_argv(c) == [
        "irtt", "client", "-o", "-", "-Q", "-6", "-i", "12500000ns", "-l", "172",
        "-d", "10000ms", "--dscp=46", "--hmac=k", "[fd00::2]:2112"]


def test_client_argv_rejects() -> None:
    with pytest.raises(ValueError, match=r"irtt"):
        irtt.client_argv(irtt.Client("127.0.0.1", interval_s=0))
    with pytest.raises(ValueError, match=r"irtt: host ::1 is not an IPv4"):
        irtt.client_argv(irtt.Client("::1"))


def test_server_argv() -> None:
    assert irtt.server_argv("127.0.0.1", 2399) == ["irtt", "server", "-b", "127.0.0.1:2399"]
    assert irtt.server_argv("::1", 2399) == ["irtt", "server", "-b", "[::1]:2399"]


def test_loopback() -> None:
    r = load("loopback.json")
    assert r.version == "0.9.0"
    assert (r.packets_sent, r.packets_received, r.loss_pct) == (100, 100, 0.0)
    assert [s.seq for s in r.samples] == list(range(100))
    assert all(s.lost == "false" and s.rtt_s is not None for s in r.samples)
    assert r.rtt_median_s == pytest.approx(287899e-9)
    assert r.ipdv_mean_s == pytest.approx(52603e-9)
    first = r.samples[0]
    assert first.t_unix == pytest.approx(1795351191.311404949)
    assert (first.rtt_s, first.send_delay_s, first.receive_delay_s) == pytest.approx(
        (286388e-9, 154200e-9, 132188e-9))
    assert first.ipdv_s is None and r.samples[1].ipdv_s == pytest.approx(-37678e-9)
    steps = [b.t_unix - a.t_unix for a, b in zip(r.samples, r.samples[1:], strict=False)]
    assert all(abs(x - 0.02) < 0.005 for x in steps)


def test_upstream_loss() -> None:
    r = load("loss_up.json")
    lost = [s for s in r.samples if s.lost != "false"]
    assert {s.lost for s in lost} == {"true_up"} and len(lost) == 25
    assert all(s.rtt_s is None and s.send_delay_s is None for s in lost)
    assert (r.packets_received, r.loss_pct, r.upstream_loss_pct, r.downstream_loss_pct) == (
        75, 25.0, 25.0, 0.0)


def test_downstream_loss() -> None:
    r = load("loss_down.json")
    assert sum(s.lost == "true_down" for s in r.samples) == 20
    assert (r.packets_received, r.loss_pct, r.downstream_loss_pct) == (80, 20.0, 20.0)
    assert r.packets_sent - r.packets_received == sum(s.rtt_s is None for s in r.samples)


def test_truncated_raises() -> None:
    text = (DATA / "loopback.json").read_text()
    with pytest.raises(ToolOutputError, match=r"^irtt: output is not JSON \(line \d+"):
        irtt.parse(text[:2000])


def test_inconsistent_or_foreign_json_raises() -> None:
    doc = json.loads((DATA / "loopback.json").read_text())
    doc["round_trips"] = doc["round_trips"][:10]
    with pytest.raises(ToolOutputError, match=r"irtt: 10 round trips but stats say 100"):
        irtt.parse(json.dumps(doc))
    doc["round_trips"][0]["lost"] = "maybe"
    with pytest.raises(ToolOutputError, match=r"irtt: unexpected JSON layout.*'maybe'"):
        irtt.parse(json.dumps(doc))
    with pytest.raises(ToolOutputError, match=r"irtt: output is JSON but has no"):
        irtt.parse('{"start": {}}')
