"""One definition of loss (hoplab.metrics.loss_ratio): packets sent minus packets received
over packets sent, by the sender's count, in every figure called loss: a UDP flow's and
its run's, an imported iperf3 run's, ping's, irtt's each way, a test's pooled probes and
the RFC 2544 search's trials. Known answers from real captured outputs (tests/data), the
expected figure computed here from the counts the tools printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab import metrics
from hoplab.analysis.ndr import Trial
from hoplab.importers import Options, load_file
from hoplab.kinds.figures import run_figures
from hoplab.kinds.flow import Outcome
from hoplab.kinds.ping import collect_ping
from hoplab.kinds.probe import collect_probe
from hoplab.kinds.tcp import collect_bulk
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.experiment import Test as TestSpec

DATA = Path(__file__).resolve().parents[1] / "data"


def counts(name: str, suffix: str = "") -> tuple[int, int]:
    """(sent, received) of one direction of a captured iperf3 UDP report, read from its
    JSON: the sender's count, and the receiver's highest sequence number less the gaps
    below it."""
    end = json.loads((DATA / "iperf3" / name).read_text())["end"]
    rcvd = end[f"sum_received{suffix}"]
    return end[f"sum_sent{suffix}"]["packets"], rcvd["packets"] - rcvd["lost_packets"]


def udp_flow(name: str, direction: str) -> Outcome:
    text = (DATA / "iperf3" / name).read_text()
    out = Outcome(Flow(name="u", kind="udp", src="a", dst="b", duration_s=3.0,
                       direction=direction))
    collect_bulk(out, text, 0.0, (0.0, 3.0))
    return out


def run_loss(outcomes: list[Outcome], kind: str) -> float:
    test = TestSpec(name="t", kind=kind, src="a", dst="b",
                    flows=tuple(o.flow for o in outcomes), phases=(Phase("load", 0.0, 3.0),))
    _, figures, _ = run_figures(test, outcomes, 3.0)
    return next(m.value for m in figures if m.name == "loss" and m.flow is None)


def test_the_definition() -> None:
    assert metrics.loss_ratio(1000, 990) == pytest.approx(0.01)
    assert metrics.loss_percent(1000, 990) == pytest.approx(1.0)
    assert metrics.loss_ratio(1000, 1003) == 0.0  # duplicates are not negative loss
    assert metrics.loss_ratio(0, 0) == 0.0


# Real downloads and uploads, each with the loss computed from its counts, and what the
# figures said before: iperf3's lost_percent (the gaps over the sender's count, the flow's)
# and the gaps over the receiver's highest sequence number (the run's).
CAPTURES = [
    # 30 Mbit/s offered through 20 Mbit/s (HTB) and 35 ms: the client stopped counting
    # with the bottleneck's 1000-packet FIFO still full; those never arrived. Was 18.07 %
    # for the flow and 22.19 % for the run.
    ("udp_reverse_shaped_server_output.json", "down", 9605, 6086, 36.637),
    # The same path uploading: its server counts until the word to stop, which follows
    # the FIFO's last packet. One datagram sent after the last it saw.
    ("udp_upload_shaped_server_output.json", "up", 9373, 7084, 24.421),
    # examples/exit-70ms-run.toml's udp-down with duration=3s (the run; this
    # machine's sender offered 506 of the 1000 Mbit/s asked): was 64.38 % and 66.99 %.
    ("udp_reverse_exit70ms_server_output.json", "down", 162641, 51593, 68.278),
    ("udp_reverse.json", "down", 20817, 20794, 0.110),
]


@pytest.mark.parametrize(("name", "direction", "sent", "received", "loss"), CAPTURES)
def test_udp_loss_is_sent_less_received_over_sent_in_the_flow_the_run_and_an_import(
        name: str, direction: str, sent: int, received: int, loss: float) -> None:
    assert counts(name) == (sent, received)
    expected = 100 * (sent - received) / sent
    assert expected == pytest.approx(loss, abs=5e-4)
    out = udp_flow(name, direction)
    assert out.metric_value("loss") == pytest.approx(expected, rel=1e-12)
    assert out.metric_value("packets") == sent
    assert out.metric_value("lost_packets") == sent - received
    assert run_loss([out], "udp") == pytest.approx(expected, rel=1e-12)
    run = load_file(DATA / "iperf3" / name, Options())
    assert run.metric("loss") == pytest.approx(expected, rel=1e-12)
    assert run.metric("loss", flow=run.test) == pytest.approx(expected, rel=1e-12)
    assert run.metric("packets") == sent


def test_a_bidir_flows_loss_adds_both_directions_counts() -> None:
    up, down = counts("udp_bidir.json"), counts("udp_bidir.json", "_bidir_reverse")
    out = udp_flow("udp_bidir.json", "bidir")
    sent, received = up[0] + down[0], up[1] + down[1]
    assert out.metric_value("packets") == sent == 20817
    assert out.metric_value("loss") == pytest.approx(100 * (sent - received) / sent)


def test_a_runs_loss_adds_its_flows_counts() -> None:
    down = udp_flow("udp_reverse_shaped_server_output.json", "down")
    up = udp_flow("udp_upload_shaped_server_output.json", "up")
    sent, received = 9605 + 9373, 6086 + 7084
    assert run_loss([down, up], "udp") == pytest.approx(100 * (sent - received) / sent)


def test_ping_loss_by_its_counts() -> None:
    # "20 packets transmitted, 16 received, 20% packet loss"
    out = Outcome(Flow(name="p", kind="ping", src="a", dst="b", duration_s=4))
    collect_ping(out, (DATA / "ping" / "loss_v4.txt").read_text(), t0=0.0)
    assert out.packets == (20, 16)
    assert out.metric_value("loss") == pytest.approx(100 * 4 / 20)


@pytest.mark.parametrize(("name", "at_server", "received", "up", "down"), [
    # 100 requests; the server received 75 and answered each; 75 replies came back.
    ("loss_up.json", 75, 75, 25.0, 0.0),
    # 100 requests all reached the server; 80 of its 100 replies came back.
    ("loss_down.json", 100, 80, 0.0, 20.0),
])
def test_irtt_loss_each_way_by_its_own_senders_count(name: str, at_server: int, received: int,
                                                     up: float, down: float) -> None:
    doc = json.loads((DATA / "irtt" / name).read_text())["stats"]
    assert (doc["packets_sent"], doc["server_packets_received"], doc["packets_received"]) == (
        100, at_server, received)
    out = Outcome(Flow(name="q", kind="probe", src="a", dst="b", duration_s=2))
    collect_probe(out, (DATA / "irtt" / name).read_text(), t0=0.0)
    assert out.metric_value("loss") == pytest.approx(100 * (100 - received) / 100)
    assert out.metric_value("loss_up") == pytest.approx(100 * (100 - at_server) / 100) == up
    assert out.metric_value("loss_down") == pytest.approx(
        100 * (at_server - received) / at_server) == down


def test_pooled_probe_loss_adds_the_probes_counts() -> None:
    ping = Outcome(Flow(name="p", kind="ping", src="a", dst="b", duration_s=4))
    collect_ping(ping, (DATA / "ping" / "loss_v4.txt").read_text(), t0=0.0)
    probe = Outcome(Flow(name="q", kind="probe", src="a", dst="b", duration_s=2))
    collect_probe(probe, (DATA / "irtt" / "loss_down.json").read_text(), t0=0.0)
    # 20 + 100 sent, 16 + 80 received.
    assert run_loss([ping, probe], "rrul") == pytest.approx(100 * (120 - 96) / 120)


def test_the_rfc_2544_trials_use_the_same_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Trial(100, 1000, 990).loss_ratio == metrics.loss_ratio(1000, 990)
    # Not a copy of it: the trial asks the one function.
    monkeypatch.setattr(metrics, "loss_ratio", lambda sent, received: 0.25)
    assert Trial(100, 1000, 990).loss_ratio == 0.25
