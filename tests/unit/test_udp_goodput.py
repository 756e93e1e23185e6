"""A UDP flow's goodput counts the time its datagrams arrived in, not its receiver's test
(hoplab.kinds.tcp.udp_first_datagram): the same up and down a path. Known answers from
real captures through 20 Mbit/s (HTB) and 35 ms each way (tests/data/README.md): each
direction carries 20 x 1200 / 1242 = 19.32 Mbit/s of payload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab.importers import Options, load_file
from hoplab.kinds.figures import run_figures
from hoplab.kinds.flow import Outcome
from hoplab.kinds.tcp import collect_bulk, received, udp_first_datagram
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.experiment import Test as TestSpec
from hoplab.tools import iperf3

DATA = Path(__file__).resolve().parents[1] / "data" / "iperf3"
PAYLOAD_BPS = 20e6 * 1200 / 1242
UP, DOWN = "udp_upload_shaped_server_output.json", "udp_reverse_shaped_server_output.json"


def flow(file: str, direction: str, *, name: str = "u", offset: float = 0.0) -> Outcome:
    out = Outcome(Flow(name=name, kind="udp", src="a", dst="b", duration_s=3.0,
                       direction=direction))
    collect_bulk(out, (DATA / file).read_text(), offset, (0.0, 3.0), offset)
    return out


def whole(outcomes: list[Outcome], name: str) -> float:
    test = TestSpec(name="t", kind="udp", src="a", dst="b",
                    flows=tuple(o.flow for o in outcomes), phases=(Phase("load", 0.0, 3.0),))
    _, metrics, _ = run_figures(test, outcomes, 5.0)
    return next(m.value for m in metrics if m.name == name and m.flow is None)


@pytest.mark.parametrize(("file", "direction", "iperf3_off"), [
    # The server's clock started 70 ms (a round trip) and more before its first datagram:
    # iperf3's rate was 1.32 % low.
    (UP, "up", -1.32),
    # The client's clock started with its data, and HTB's burst came first: 0.78 % high.
    (DOWN, "down", +0.78),
])
def test_both_directions_give_the_payload_rate(file: str, direction: str,
                                               iperf3_off: float) -> None:
    end = json.loads((DATA / file).read_text())["end"]["sum_received"]
    assert 100 * (end["bits_per_second"] / PAYLOAD_BPS - 1) == pytest.approx(iperf3_off,
                                                                             abs=0.01)
    out = flow(file, direction)
    assert out.metric_value("goodput") == pytest.approx(PAYLOAD_BPS, rel=1e-3)
    assert out.metric_value("bytes_received") == end["bytes"]
    # The run's figures are its one flow's, and so is an import of the same output.
    assert whole([out], "goodput") == pytest.approx(out.metric_value("goodput"), rel=1e-12)
    if direction == "down":
        assert whole([out], "goodput_down") == pytest.approx(out.metric_value("goodput"))
    run = load_file(DATA / file, Options())
    assert run.metric("goodput") == pytest.approx(out.metric_value("goodput"), rel=1e-12)


def test_the_first_datagram_of_an_upload_came_a_round_trip_after_its_receivers_start() -> None:
    # 35 ms each way: the word to start went down, the first datagram came up; HTB's
    # burst (67 kB, 27 ms at 20 Mbit/s) arrived in the same first interval, so the span
    # starts that much earlier than the datagram did.
    (got,) = received(iperf3.parse((DATA / UP).read_text()), "up").values()
    assert 0.07 - 0.027 < got.first < 0.07 + 0.01
    assert got.last == pytest.approx(3.566502, abs=1e-6)
    # A download's client started counting with its data, HTB's burst first: below 0.
    (down,) = received(iperf3.parse((DATA / DOWN).read_text()), "down").values()
    assert -0.03 < down.first < 0


def test_a_runs_goodput_spans_its_flows_data() -> None:
    # The download starts 1 s after the upload: bytes over the time from the upload's
    # first datagram to the download's end.
    up, down = flow(UP, "up", name="a"), flow(DOWN, "down", name="b", offset=1.0)
    first, _, up_bytes = up.received["up"]
    _, last, down_bytes = down.received["down"]
    assert whole([up, down], "goodput") == pytest.approx(8 * (up_bytes + down_bytes)
                                                         / (last - first))


def test_a_tcp_flow_counts_its_whole_test() -> None:
    # TCP's ramp is part of its time: its goodput stays iperf3's.
    text = (DATA / "tcp_p2_server_output.json").read_text()
    out = Outcome(Flow(name="t", kind="tcp", src="a", dst="b", duration_s=1.0))
    collect_bulk(out, text, 0.0, (0.0, 1.0))
    assert out.metric_value("goodput") == pytest.approx(iperf3.parse(text).received_bps)


def test_without_two_receiver_intervals_the_test_start_stands() -> None:
    # A client-only upload output has no receiver intervals (udp_200m.json).
    (got,) = received(iperf3.parse((DATA / "udp_200m.json").read_text()), "up").values()
    assert got.first == 0.0
    assert udp_first_datagram([(0.0, 0.2, 1000)], 0.2, 1000) == 0.0
