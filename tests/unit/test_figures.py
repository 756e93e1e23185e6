"""Run figures from real tool outputs (tests/data): per flow, totals, phases, fairness."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from hoplab.kinds.figures import run_figures
from hoplab.kinds.flow import Outcome
from hoplab.kinds.ping import collect_ping
from hoplab.kinds.probe import collect_probe
from hoplab.kinds.tcp import collect_bulk
from hoplab.record import Metric, RunRecord
from hoplab.render.summary import per_hop_rows, summary_rows
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.experiment import Test as TestSpec

DATA = Path(__file__).resolve().parents[1] / "data"


def bulk(name: str, file: str, *, src: str = "a", direction: str = "up", start: float = 0.0,
         offset: float = 0.0, kind: str = "tcp") -> Outcome:
    text = (DATA / "iperf3" / file).read_text()
    doc = json.loads(text)
    seconds = doc["start"]["test_start"]["duration"]
    flow = Flow(name=name, kind=kind, src=src, dst="z", start_s=start, duration_s=seconds,
                direction=direction)
    out = Outcome(flow)
    collect_bulk(out, text, offset, (0.0, 100.0))
    return out


def test_upload_flow_figures_match_iperf3s_own_sums() -> None:
    out = bulk("f", "tcp_p2_server_output.json")
    doc = json.loads((DATA / "iperf3" / "tcp_p2_server_output.json").read_text())
    assert out.metric_value("goodput") == pytest.approx(
        doc["end"]["sum_received"]["bits_per_second"])
    assert out.metric_value("bytes_received") == doc["end"]["sum_received"]["bytes"]
    # The flow's series is measured at the receiver (the server's intervals).
    (series,) = [s for s in out.series if s.name == "throughput"]
    server = doc["server_output_json"]["intervals"]
    assert len(series.t) == len(server)
    assert series.v[0] == pytest.approx(server[0]["sum"]["bits_per_second"], rel=1e-3)


def test_bidir_flow_has_a_series_per_direction() -> None:
    out = bulk("f", "tcp_bidir.json", direction="bidir")
    keys = sorted(str(s.key) for s in out.series if s.name == "throughput")
    assert keys == ["down", "up"]
    assert out.metric_value("goodput_reverse") > 0


def test_total_goodput_counts_bytes_over_the_union_of_receiver_spans() -> None:
    a = bulk("a", "tcp_upload.json")
    b = bulk("b", "tcp_upload.json", offset=1.0)
    test = TestSpec(name="t", kind="tcp", src="a", dst="z", flows=(a.flow, b.flow),
                phases=(Phase("load", 0.0, 3.0),))
    _, metrics, _ = run_figures(test, [a, b], 3.0)
    goodput = next(m.value for m in metrics if m.name == "goodput")
    assert a.span is not None and b.span is not None
    width = b.span[1] - a.span[0]
    assert goodput == pytest.approx(8 * 2 * a.metric_value("bytes_received") / width)
    # Less than the two flows' own rates added: they did not run side by side throughout.
    assert goodput < a.metric_value("goodput") + b.metric_value("goodput")


def test_fairness_between_two_hosts() -> None:
    a = bulk("a", "tcp_upload.json", src="hostA")
    b = bulk("b", "tcp_upload.json", src="hostB")
    test = TestSpec(name="t", kind="custom", src="hostA", dst="z", flows=(a.flow, b.flow),
                phases=(Phase("load", 0.0, 3.0),))
    _, metrics, _ = run_figures(test, [a, b], 3.0)
    jain = next(m.value for m in metrics if m.name == "jain_index")
    shares = {m.node: m.value for m in metrics if m.name == "host_share"}
    assert jain == pytest.approx(1.0)
    assert shares == pytest.approx({"hostA": 50.0, "hostB": 50.0})


def test_udp_loss_counts_the_senders_datagrams_against_the_receivers() -> None:
    out = bulk("u", "udp_reverse.json", kind="udp", direction="down")
    end = json.loads((DATA / "iperf3" / "udp_reverse.json").read_text())["end"]
    sent = end["sum_sent"]["packets"]
    received = end["sum_received"]["packets"] - end["sum_received"]["lost_packets"]
    assert out.metric_value("loss") == pytest.approx(100 * (sent - received) / sent)


def test_ping_figures_and_lost_echoes() -> None:
    out = Outcome(Flow(name="p", kind="ping", src="a", dst="z", duration_s=10))
    text = (DATA / "ping" / "loss_v4.txt").read_text()
    collect_ping(out, text, t0=0.0)
    assert 0 < out.metric_value("loss") < 100
    lost = [s for s in out.series if s.name == "lost"]
    assert lost and len(lost[0].t) + len(out.rtt_ms) == out.metric_value("packets")
    assert out.metric_value("rtt_min") <= out.metric_value("rtt_median") \
        <= out.metric_value("rtt_max")


def test_probe_figures_include_one_way_delays() -> None:
    out = Outcome(Flow(name="q", kind="probe", src="a", dst="z", duration_s=2))
    collect_probe(out, (DATA / "irtt" / "loopback.json").read_text(), t0=0.0)
    names = {m.name for m in out.metrics}
    assert {"rtt_median", "loss", "owd_up_median", "owd_down_median", "ipdv_mean"} <= names
    assert out.metric_value("owd_up_median") < out.metric_value("rtt_median")


def test_rrul_latency_by_phase() -> None:
    ping = Outcome(Flow(name="p", kind="ping", src="a", dst="z", duration_s=9))
    ping.rtt_t = [0.5, 1.5, 3.5, 4.5, 5.5, 8.5]
    ping.rtt_ms = [1.0, 1.0, 40.0, 60.0, 50.0, 2.0]
    ping.metrics = [Metric("packets", 6.0, "count", flow="p"), Metric("loss", 0.0, "%", flow="p")]
    test = TestSpec(name="r", kind="rrul", src="a", dst="z", flows=(ping.flow,),
                phases=(Phase("idle", 0, 3), Phase("load", 3, 6), Phase("idle-after", 6, 9)))
    _, metrics, notes = run_figures(test, [ping], 9.0)
    got = {m.name: m.value for m in metrics}
    assert got["latency_idle"] == 1.0 and got["latency_load"] == 50.0
    assert got["latency_increase"] == 49.0 and notes["grade"] == "B"


def record(test: str, kind: str, variant: dict[str, object], metrics: list[Metric],
           status: str = "ok") -> RunRecord:
    return RunRecord(experiment="e", test=test, kind=kind, repetition=1, variant=variant,
                     labels={}, started_at=0.0, status=status,  # type: ignore[arg-type]
                     metrics=metrics)


def test_summary_rows_take_medians_and_skip_failed_runs() -> None:
    recs = [record("t", "tcp", {"hops": 1}, [Metric("goodput", v, "bit/s")])
            for v in (90.0, 100.0, 95.0)]
    recs.append(record("t", "tcp", {"hops": 1}, [Metric("goodput", 1.0, "bit/s")], "failed"))
    (row,) = summary_rows(recs)
    assert (row["runs"], row["ok"]) == (4, 3)
    assert row["figures"]["goodput"] == {"median": 95.0, "min": 90.0, "max": 100.0, "n": 3}


def test_custom_summary_has_a_row_per_flow() -> None:
    recs = [record("mix", "custom", {}, [Metric("goodput", 5.0, "bit/s"),
                                         Metric("jain_index", 0.8, "index"),
                                         Metric("loss", 2.0, "%", flow="voip")])]
    rows = summary_rows(recs)
    assert [r["flow"] for r in rows] == ["(all)", "voip"]
    assert rows[1]["figures"]["loss"]["median"] == 2.0


def test_cost_per_hop() -> None:
    recs = [record("tcp", "tcp", {"hops": h, "wireguard": wg},
                   [Metric("goodput", 100.0 - (10.0 if wg else 5.0) * (h - 1), "bit/s")])
            for h in (1, 2, 3) for wg in (False, True)]
    rows = {r["variant"]: r for r in per_hop_rows(recs)}
    assert rows["wireguard=false"]["per_hop"] == pytest.approx(-5.0)
    assert rows["wireguard=true"]["per_hop_pct"] == pytest.approx(-10.0)
    assert not math.isnan(rows["wireguard=true"]["per_hop"])


def test_udp_test_figures_sum_and_weigh_the_flows() -> None:
    a = bulk("a", "udp_200m.json", kind="udp")
    b = bulk("b", "udp_reverse.json", kind="udp", direction="down")
    test = TestSpec(name="t", kind="udp", src="a", dst="z", flows=(a.flow, b.flow),
                    phases=(Phase("load", 0.0, 1.0),))
    _, metrics, _ = run_figures(test, [a, b], 1.0)
    got = {m.name: m.value for m in metrics}
    ra, rb = a.bulk, b.bulk
    assert ra is not None and rb is not None
    # Datagrams sent by the senders' counts, received by the receivers': 0 and 23 lost.
    sent = (ra.sent_packets or 0) + (rb.sent_packets or 0)
    assert sent == 20821 + 20817
    assert got["loss"] == pytest.approx(100 * 23 / sent)
    assert min(ra.jitter_s or 0, rb.jitter_s or 0) * 1000 <= got["udp_jitter"] \
        <= max(ra.jitter_s or 0, rb.jitter_s or 0) * 1000


def test_rrul_load_mean_has_no_bin_from_before_the_load() -> None:
    # One upload in the load phase [1, 2) s; the bin ending at 1.0 s is idle and must not
    # count (it made the mean a sixth low here, 1 % over rrul's 100 bins).
    up = bulk("r.up", "tcp_upload.json", start=1.0, offset=1.0)
    test = TestSpec(name="r", kind="rrul", src="a", dst="z", flows=(up.flow,),
                    phases=(Phase("idle", 0, 1), Phase("load", 1, 2), Phase("idle-after", 2, 3)))
    _, metrics, _ = run_figures(test, [up], 3.0)
    doc = json.loads((DATA / "iperf3" / "tcp_upload.json").read_text())
    bits = 8 * sum(i["sum"]["bytes"] for i in doc["intervals"])
    mean = next(m.value for m in metrics if m.name == "throughput_mean" and m.key is None)
    assert mean == pytest.approx(bits / 1.0, rel=1e-3)


def test_custom_udp_and_ping_give_two_jitters_with_their_own_names() -> None:
    # Before: both were "jitter" (iperf3's and the RTT one); each view picked another.
    from hoplab.record import check_metric_keys

    udp = bulk("mix.voip", "udp_200m.json", kind="udp")
    ping = Outcome(Flow(name="mix.ping", kind="ping", src="a", dst="z", duration_s=10))
    collect_ping(ping, (DATA / "ping" / "loopback_v4.txt").read_text(), t0=0.0)
    test = TestSpec(name="mix", kind="custom", src="a", dst="z", flows=(udp.flow, ping.flow),
                    phases=(Phase("load", 0.0, 10.0),))
    _, metrics, _ = run_figures(test, [udp, ping], 10.0)
    run = record("mix", "custom", {}, udp.metrics + ping.metrics + metrics)
    check_metric_keys(run)
    assert udp.bulk is not None and udp.bulk.jitter_s is not None
    assert run.metric("udp_jitter") == pytest.approx(1000 * udp.bulk.jitter_s)
    assert run.metric("rtt_jitter") == pytest.approx(ping.metric_value("rtt_jitter"))
    assert run.metric("jitter") is None


def test_bidir_totals_count_both_directions_like_the_series() -> None:
    # Captured as hoplab runs iperf3 (--bidir --get-server-output, server -J -i 0.2); the
    # two directions differ (12.0 and 9.5 Gbit/s on loopback). Before: the run's goodput
    # was the upload only while throughput_mean summed both, and goodput_up / _down were
    # missing.
    out = bulk("b", "tcp_bidir_server_output.json", direction="bidir")
    end = json.loads((DATA / "iperf3" / "tcp_bidir_server_output.json").read_text())["end"]
    up = end["sum_received"]["bits_per_second"]
    down = end["sum_received_bidir_reverse"]["bits_per_second"]
    sent = end["sum_sent"]["bits_per_second"] + end["sum_sent_bidir_reverse"]["bits_per_second"]
    assert out.metric_value("goodput_up") == pytest.approx(up)
    assert out.metric_value("goodput_down") == pytest.approx(down)
    assert out.metric_value("goodput") == pytest.approx(up + down)
    assert out.metric_value("sent_rate") == pytest.approx(sent)
    test = TestSpec(name="t", kind="tcp", src="a", dst="z", flows=(out.flow,),
                    phases=(Phase("load", 0.0, 1.0),))
    _, metrics, _ = run_figures(test, [out], 1.2)
    got = {m.name: m.value for m in metrics}
    # Both receivers counted for the same 1.009336 s: the run's goodput is their sum.
    assert got["goodput_up"] == pytest.approx(up)
    assert got["goodput_down"] == pytest.approx(down)
    assert got["goodput"] == pytest.approx(up + down)
    assert got["sent_rate"] == pytest.approx(sent)
    # The summed series' mean over the load agrees with the goodput (iperf3's first
    # interval includes the connection's start: within 1 %), and so do the directions.
    assert got["throughput_mean"] == pytest.approx(up + down, rel=0.01)
    assert got["throughput_mean_up"] == pytest.approx(up, rel=0.01)
    assert got["throughput_mean_down"] == pytest.approx(down, rel=0.01)


def test_udp_bidir_flow_counts_the_datagrams_of_both_directions() -> None:
    out = bulk("u", "udp_bidir.json", kind="udp", direction="bidir")
    end = json.loads((DATA / "iperf3" / "udp_bidir.json").read_text())["end"]
    assert out.metric_value("packets") == (end["sum_sent"]["packets"]
                                           + end["sum_sent_bidir_reverse"]["packets"])
    # Each direction's jitter weighted by the datagrams it received (none lost here).
    assert out.metric_value("udp_jitter") == pytest.approx(1000 * (
        end["sum_received"]["jitter_ms"] / 1000 * end["sum_received"]["packets"]
        + end["sum_received_bidir_reverse"]["jitter_ms"] / 1000
        * end["sum_received_bidir_reverse"]["packets"])
        / out.metric_value("packets"))


def _chain_lab(hops: int, shaped: str) -> dict[str, object]:
    """A chain's lab summary: `shaped` "access" (client - r1) or "inner" (each router-to-
    router link) at 100 Mbit/s."""
    ends = ["client", *(f"r{i}" for i in range(1, hops + 1)), "server"]
    links = []
    for i, (a, b) in enumerate(itertools.pairwise(ends)):
        inner = a.startswith("r") and b.startswith("r")
        rate = {"rate_bps": 1e8} if (i == 0 if shaped == "access" else inner) else {}
        links.append({"index": i, "between": [a, b], "wireguard": False, "forward": rate,
                      "reverse": rate})
    return {"nodes": {}, "links": links, "tunnels": []}


def test_cost_per_hop_only_where_hops_are_all_that_differs() -> None:
    # Issue 27: with the bottleneck on a router-to-router link, hops = 1 has none
    # (27.5 Gbit/s) and a slope through it said -28.5 % per hop.
    def runs(shaped: str) -> list[RunRecord]:
        out = []
        for h, v in ((1, 27.5e9), (2, 94e6), (4, 93e6)):
            r = record("tcp-up", "tcp", {"hops": h}, [Metric("goodput", v, "bit/s")])
            r.metadata["lab"] = _chain_lab(h, shaped)
            out.append(r)
        return out

    (row,) = per_hop_rows(runs("inner"))
    assert row["hops"] == [2.0, 4.0] and row["left_out"] == [1.0]
    assert row["per_hop"] == pytest.approx(-0.5e6)
    (row,) = per_hop_rows(runs("access"))
    assert row["hops"] == [1.0, 2.0, 4.0] and row["left_out"] == []
