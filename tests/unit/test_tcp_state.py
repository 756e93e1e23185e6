"""The tcp_info sampler's place in a run (which nodes, which flows, on by default) and
RFC 6349's figures of its series, with the bottleneck read from the lab."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from hoplab.analysis import rfc6349
from hoplab.kinds.tcp_flows import ideal_rates, rfc6349_metrics, senders
from hoplab.lab.plan import Plan, plan_lab
from hoplab.nodes.executor import Snapshot
from hoplab.nodes.fake import FakeExecutor
from hoplab.record import Metric, RunRecord, Series
from hoplab.render.run_view import run_view
from hoplab.run.execute import sampler_targets
from hoplab.samplers import Samplers, Target
from hoplab.samplers.tcp_info import FlowSocket
from hoplab.spec import load_lab_text
from hoplab.spec.experiment import Test
from hoplab.spec.experiment_loader import load_experiment
from hoplab.tools import inet_diag

DATA = Path(__file__).resolve().parents[1] / "data" / "inet_diag"
PAYLOAD_20M = 20e6 * 1448 / 1514

LAB = """
name = "s"
[nodes.client]
[nodes.r1]
[nodes.server]
[[links]]
between = ["client", "r1"]
[[links]]
between = ["r1", "server"]
forward = { rate = "20mbit" }
"""


def load(tmp_path: Path, body: str, lab: str = LAB) -> tuple[Test, Plan]:
    (tmp_path / "lab.toml").write_text(lab)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n[[tests]]\nname = "t"\nfrom = "client"\n'
                    'to = "server"\n' + body)
    test = load_experiment(path).variants[0].tests[0]
    return test, plan_lab(load_lab_text(lab, "lab.toml"))


def test_payload_rate_of_a_shaped_link() -> None:
    assert rfc6349.payload_rate(20e6) == pytest.approx(19.128e6, rel=1e-4)
    assert rfc6349.payload_rate(20e6, family=6) == pytest.approx(20e6 * 1428 / 1514)
    assert rfc6349.payload_rate(20e6, mtu=9000) == pytest.approx(20e6 * 8948 / 9014)


def test_each_flows_sender_finds_its_socket_by_the_servers_port(tmp_path: Path) -> None:
    test, plan = load(tmp_path, 'kind = "tcp"\nflows = 2\n')
    assert senders(test, plan) == {"client": [FlowSocket("t.1", 5201, local=False),
                                              FlowSocket("t.2", 5202, local=False)]}
    test, plan = load(tmp_path, 'kind = "tcp"\ndirection = "down"\n')
    assert senders(test, plan) == {"server": [FlowSocket("t", 5201, local=True)]}
    test, plan = load(tmp_path, 'kind = "tcp"\ndirection = "bidir"\n')
    assert senders(test, plan) == {"client": [FlowSocket("t", 5201, False, "up")],
                                   "server": [FlowSocket("t", 5201, True, "down")]}
    test, plan = load(tmp_path, 'kind = "udp"\n')
    assert senders(test, plan) == {}


def test_on_by_default_and_off_when_the_samplers_say_so(tmp_path: Path) -> None:
    nodes = {n: FakeExecutor(n) for n in ("client", "r1", "server")}
    test, plan = load(tmp_path, 'kind = "tcp"\n')
    got = {t.node: (t.kinds, t.flows) for t in sampler_targets(test, plan, nodes)}
    assert got["client"] == (frozenset({"tcp", "tcp_info"}), (FlowSocket("t", 5201, False),))
    assert got["server"] == (frozenset({"tcp"}), ())
    assert "tcp_info" not in got["r1"][0]
    test, plan = load(tmp_path, 'kind = "tcp"\nsamplers = { kinds = ["ifaces", "tcp"] }\n')
    assert all("tcp_info" not in t.kinds for t in sampler_targets(test, plan, nodes))
    # Routers chosen by name: the flow's sender is read all the same.
    test, plan = load(tmp_path, 'kind = "tcp"\ndirection = "down"\n'
                                'samplers = { nodes = ["r1"], kinds = ["qdisc", "tcp_info"] }\n')
    got = {t.node: (t.kinds, t.flows) for t in sampler_targets(test, plan, nodes)}
    assert got == {"r1": (frozenset({"qdisc"}), ()),
                   "server": (frozenset({"tcp_info"}), (FlowSocket("t", 5201, True),))}


def test_the_bottleneck_from_the_lab_or_the_test(tmp_path: Path) -> None:
    test, plan = load(tmp_path, 'kind = "tcp"\n')
    assert ideal_rates(test, plan) == {None: pytest.approx(PAYLOAD_20M)}
    # Downloads cross the unshaped direction; both ways at once are keyed.
    test, plan = load(tmp_path, 'kind = "tcp"\ndirection = "down"\n')
    assert ideal_rates(test, plan) == {}
    test, plan = load(tmp_path, 'kind = "tcp"\ndirection = "bidir"\nbottleneck = "10mbit"\n')
    assert ideal_rates(test, plan) == {"up": pytest.approx(PAYLOAD_20M / 2),
                                       "down": pytest.approx(PAYLOAD_20M / 2)}
    test, plan = load(tmp_path, 'kind = "tcp"\nfamily = 6\n')
    assert ideal_rates(test, plan) == {None: pytest.approx(20e6 * 1428 / 1514)}
    # A WireGuard hop's encapsulation is not in the arithmetic: no ideal, no guess.
    test, plan = load(tmp_path, 'kind = "tcp"\n', LAB + "wireguard = true\n")
    assert ideal_rates(test, plan) == {}


def _flow(name: str, node: str, srtt: list[float], sent: float, retrans: float,
          min_rtt: float) -> list[Series]:
    t = [0.5 + 0.1 * i for i in range(len(srtt))]
    return [Series("tcp.srtt", "ms", t, srtt, node=node, flow=name),
            Series("tcp.min_rtt", "ms", t, [min_rtt] * len(t), node=node, flow=name),
            Series("tcp.bytes_sent", "bytes", t, [sent / 2] * (len(t) - 1) + [sent],
                   node=node, flow=name),
            Series("tcp.bytes_retrans", "bytes", t, [0.0] * (len(t) - 1) + [retrans],
                   node=node, flow=name)]


def test_rfc6349_figures_of_two_flows() -> None:
    series = (_flow("a", "client", [60.0, 100.0, 140.0], 1e6, 1e4, 40.0)
              + _flow("b", "client", [80.0, 120.0], 3e6, 0.0, 50.0))
    got = {(m.name, m.flow): m.value for m in rfc6349.figures(
        series, (0.0, 10.0), goodput={None: 17e6}, ideal={None: PAYLOAD_20M})}
    assert got[("tcp_efficiency", "a")] == pytest.approx(99.0)
    assert got[("tcp_efficiency", "b")] == pytest.approx(100.0)
    assert got[("tcp_efficiency", None)] == pytest.approx(100 * (4e6 - 1e4) / 4e6)
    # Each flow's mean smoothed RTT over its own least RTT; the test's over the least.
    assert got[("buffer_delay_pct", "a")] == pytest.approx(150.0)
    assert got[("buffer_delay_pct", "b")] == pytest.approx(100.0)
    assert got[("buffer_delay_pct", None)] == pytest.approx(100 * (100 - 40) / 40)
    assert got[("transfer_time_ratio", None)] == pytest.approx(PAYLOAD_20M / 17e6)
    # A probe's idle RTT before the load, where there is one, is the baseline.
    idle = {(m.name, m.flow): m.value for m in rfc6349.figures(series, (0.55, 10.0),
                                                                idle_rtt_ms=50.0)}
    assert idle[("buffer_delay_pct", "a")] == pytest.approx(100 * (120 - 50) / 50)
    assert ("transfer_time_ratio", None) not in idle


def test_the_runs_figures_take_goodput_and_idle_rtt_from_its_metrics(tmp_path: Path) -> None:
    test, plan = load(tmp_path, 'kind = "tcp"\n')
    series = _flow("t", "client", [80.0, 80.0], 1e6, 0.0, 40.0)
    got = {(m.name, m.key): m.value for m in rfc6349_metrics(
        test, plan, series, [Metric("goodput", 19e6, "bit/s"),
                             Metric("latency_idle", 41.0, "ms"),
                             Metric("goodput", 1.0, "bit/s", flow="t")], (0.0, 5.0))
        if m.flow is None}
    assert got[("transfer_time_ratio", None)] == pytest.approx(PAYLOAD_20M / 19e6)
    assert got[("buffer_delay_pct", None)] == pytest.approx(100 * 39 / 41)
    test, plan = load(tmp_path, 'kind = "udp"\n')
    assert rfc6349_metrics(test, plan, series, [], (0.0, 5.0)) == []


def test_the_sampler_records_each_flows_socket_from_a_nodes_snapshots() -> None:
    socks = inet_diag.parse((DATA / "cubic-up-20mbit-40ms-q200-client.bin").read_bytes())
    node = FakeExecutor("client")
    later = [replace(s, cwnd=(s.cwnd or 0) + 1) for s in socks]
    node.snapshots = [Snapshot(sockets=socks), Snapshot(sockets=later)]
    smp = Samplers([Target("client", node, frozenset({"tcp_info"}),
                           (FlowSocket("bulk", 5201, local=False),))],
                   cpu=False, clock_zero=time.time(), interval_s=0.01)
    smp.start()
    assert smp.sampled_since(smp._now() + 0.02, 5)
    series = {s.name: s for s in smp.stop()}
    assert smp.errors == []
    cwnd = series["tcp.cwnd"]
    assert (cwnd.flow, cwnd.node, cwnd.unit) == ("bulk", "client", "segments")
    assert cwnd.v[:2] == [227, 228] and set(cwnd.v[1:]) == {228}
    assert series["tcp.delivery_rate"].unit == "bit/s"
    assert series["tcp.srtt"].v[0] == pytest.approx(133.397)


def test_show_has_a_row_per_flow_and_sender_with_its_tcp_state() -> None:
    rec = RunRecord(experiment="e", test="t", kind="tcp", repetition=1, variant={},
                    labels={}, started_at=0.0, metrics=[
                        Metric("tcp.cwnd", 160.0, "segments", flow="t", node="client",
                               key="up"),
                        Metric("tcp.delivery_rate", 19.1e6, "bit/s", flow="t",
                               node="client", key="up"),
                        Metric("tcp_efficiency", 99.8, "%", flow="t", node="client",
                               key="up"),
                        Metric("tcp.srtt", 95.6, "ms", flow="t", node="server", key="down"),
                        Metric("transfer_time_ratio", 1.031, "ratio")])
    con = Console(width=240, record=True, color_system=None)
    con.print(run_view(rec, "runs.db"))
    lines = con.export_text().splitlines()
    up = next(line for line in lines if "t @ client up" in line)
    assert [c.strip() for c in up.split("│") if c.strip()][1:] == [
        "160", "-", "19.1 Mbit/s", "99.8 %"]
    assert "95.6 ms" in next(line for line in lines if "t @ server down" in line)
    assert any("transfer time ratio" in line and "1.031" in line for line in lines)


def test_buffer_delay_is_in_ms_and_a_share_only_of_a_real_paths_idle_rtt() -> None:
    # A veth path's 0.02 ms idle RTT under 5 ms of queue: 4.98 ms, never 24,900 %.
    fast = {(m.name, m.flow): (m.value, m.unit) for m in rfc6349.figures(
        _flow("a", "client", [4.0, 6.0], 1e6, 0.0, 0.02), (0.0, 10.0))}
    assert fast[("buffer_delay_ms", "a")] == pytest.approx((4.98, "ms"))
    assert fast[("buffer_delay_ms", None)] == pytest.approx((4.98, "ms"))
    assert ("buffer_delay_pct", "a") not in fast and ("buffer_delay_pct", None) not in fast
    # A 40 ms path: both, the ms beside the %.
    slow = {(m.name, m.flow): m.value for m in rfc6349.figures(
        _flow("a", "client", [50.0, 70.0], 1e6, 0.0, 40.0), (0.0, 10.0))}
    assert slow[("buffer_delay_ms", "a")] == pytest.approx(20.0)
    assert slow[("buffer_delay_pct", "a")] == pytest.approx(50.0)
