"""The metric registry (hoplab/metrics.py) knows every figure hoplab can produce.

Runs of every test kind are built from captured tool outputs (tests/data), with the
same code a real run uses (the kinds' collectors, kinds/figures.py), plus sampler
summaries of captured /proc and tc outputs, imports of captured iperf3 and Flent
files, and every profile category: each metric name must resolve, with the unit it
is stored in. An unknown name is an error here; in production it is shown by its raw
name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from hoplab import kinds, metrics
from hoplab.analysis import rfc6349
from hoplab.analysis.groups import compare_groups
from hoplab.importers import Options, load_file
from hoplab.kinds.figures import run_figures
from hoplab.kinds.flow import ClientTimes, Outcome
from hoplab.kinds.ping import collect_ping
from hoplab.kinds.probe import collect_probe
from hoplab.kinds.tcp import collect_bulk
from hoplab.kinds.web import WebOptions
from hoplab.nodes.ssh_counters import COST_SERIES
from hoplab.profile import analyze
from hoplab.record import Metric, RunRecord, Series
from hoplab.render.html import run_tables
from hoplab.samplers import cpu, ifaces, qdisc, tcp, tcp_info, wire
from hoplab.samplers.summary import sampler_metrics
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.experiment import Test as TestSpec
from hoplab.tools import inet_diag
from hoplab.tools.tc import parse_tc_json

DATA = Path(__file__).resolve().parents[1] / "data"
PHASES = (Phase("idle", 0.0, 1.0), Phase("load", 1.0, 11.0), Phase("idle-after", 11.0, 12.0))


def _bulk_outcome(name: str, file: str, *, kind: str = "tcp", direction: str = "up",
                  src: str = "a") -> Outcome:
    text = (DATA / "iperf3" / file).read_text()
    seconds = json.loads(text)["start"]["test_start"]["duration"]
    out = Outcome(Flow(name=name, kind=kind, src=src, dst="z", start_s=1.0,
                       duration_s=seconds, direction=direction))
    collect_bulk(out, text, 1.0, (1.0, 11.0))
    return out


def _ping_outcome(name: str, file: str) -> Outcome:
    out = Outcome(Flow(name=name, kind="ping", src="a", dst="z", duration_s=10))
    collect_ping(out, (DATA / "ping" / file).read_text(), t0=0.0)
    return out


def _probe_outcome(name: str, file: str) -> Outcome:
    out = Outcome(Flow(name=name, kind="probe", src="a", dst="z", duration_s=10))
    collect_probe(out, (DATA / "irtt" / file).read_text(), t0=0.0)
    return out


def _web_outcome(name: str, file: str) -> Outcome:
    out = Outcome(Flow(name=name, kind="web", src="a", dst="z",
                       options=WebOptions(loads=5, timeout_s=10.0)))
    kinds.flow_tool("web").collect(out, (DATA / "pageload" / file).read_text(), 0.0,
                                   ClientTimes(0.0, None, None), (0.0, 10.0))
    return out


def _test_runs() -> Iterator[tuple[str, list[Metric]]]:
    """(what, metrics) of a run of each test kind, flows' metrics included."""
    def run(kind: str, outcomes: list[Outcome]) -> list[Metric]:
        test = TestSpec(name=kind, kind=kind, src="a", dst="z",
                        flows=tuple(o.flow for o in outcomes), phases=PHASES)
        _, found, _ = run_figures(test, outcomes, 12.0)
        return found + [m for o in outcomes for m in o.metrics]

    for file, direction in (("tcp_upload.json", "up"), ("tcp_reverse.json", "down"),
                            ("tcp_bidir.json", "bidir"), ("tcp_p4_cport.json", "up"),
                            ("tcp_p2_server_output.json", "up")):
        yield f"tcp {file}", run("tcp", [_bulk_outcome("f", file, direction=direction)])
    for file, direction in (("udp_200m.json", "up"), ("udp_reverse.json", "down"),
                            ("udp_bidir.json", "bidir")):
        yield f"udp {file}", run("udp", [_bulk_outcome("f", file, kind="udp",
                                                       direction=direction)])
    for file in ("loopback_v4.txt", "loss_v4.txt", "late_dup_v4.txt", "all_lost_v4.txt"):
        yield f"ping {file}", run("ping", [_ping_outcome("p", file)])
    for file in ("loopback.json", "loss_up.json", "loss_down.json"):
        yield f"probe {file}", run("probe", [_probe_outcome("q", file)])
    yield "rrul", run("rrul", [_bulk_outcome("up", "tcp_upload.json"),
                               _bulk_outcome("down", "tcp_reverse.json", direction="down"),
                               _ping_outcome("p", "loopback_v4.txt")])
    for file in ("ok_50ms.jsonl", "refused.jsonl"):
        yield f"web {file}", run("web", [_web_outcome("w", file)])
    yield "custom", run("custom", [_bulk_outcome("a", "tcp_upload.json", src="hostA"),
                                   _bulk_outcome("b", "tcp_upload.json", src="hostB"),
                                   _bulk_outcome("u", "udp_200m.json", kind="udp"),
                                   _ping_outcome("p", "loss_v4.txt"),
                                   _probe_outcome("q", "loopback.json"),
                                   _web_outcome("w", "ok_50ms.jsonl")])


def _ramp(name: str, unit: str, node: str, key: str | None, values: list[float]) -> Series:
    return Series(name, unit, [1.0 + i for i in range(len(values))], values, node=node,
                  key=key)


def _sampler_series() -> list[Series]:
    """Series of every sampler kind, with names and units as the sampler records them,
    from captured /proc and tc outputs (wire: its stats fields)."""
    out: list[Series] = []
    stat = cpu.parse_proc_stat((DATA / "proc" / "stat-tcp-load.txt").read_text())
    for row, times in stat.items():
        idle = cpu.parse_proc_stat((DATA / "proc" / "stat-tcp-load.txt").read_text())[row]
        shares = cpu.shares(idle, times) or {s: 0.0 for s in cpu.STATES}
        out += [_ramp(f"cpu.{s}", "%", "host", row, [v, v]) for s, v in shares.items()]
    out += [_ramp(f"cpu.{s}", "%", "host", "all", [1.0, 2.0]) for s in cpu.STATES]
    dev = ifaces.parse_net_dev((DATA / "proc" / "net-dev-r1-tcp-load.txt").read_text())
    for name, unit, field in ifaces.FIELDS:
        out += [_ramp(name, unit, "r1", d, [0.0, float(getattr(c, field))])
                for d, c in dev.items()]
    for q in parse_tc_json((DATA / "tc" / "r1-htb-pfifo-tcp-load.json").read_text()):
        out += [_ramp(name, unit, "r1", q.key, [0.0, float(getattr(q, field))])
                for name, unit, field in qdisc.FIELDS]
    counters = tcp.tcp_counters((DATA / "proc" / "net-snmp-client-tcp-load.txt").read_text(),
                                (DATA / "proc" / "net-netstat-client-tcp-load.txt").read_text())
    out += [_ramp(name, "segments", "client", None, [0.0, float(v)])
            for name, v in counters.items()]
    out += [_ramp(name, unit, "w1", d, [0.0, 5.0]) for name, unit, _ in wire.FIELDS
            for d in wire.DIRECTIONS]
    out.append(_ramp(*COST_SERIES, "router", None, [0.6, 0.5]))
    # tcp_info: a flow's socket from a captured netlink dump, as the sampler records it.
    sock = next(s for s in inet_diag.parse(
        (DATA / "inet_diag" / "cubic-up-20mbit-40ms-q200-client.bin").read_bytes())
        if s.local_port == 50001)
    for name, v in tcp_info.values(sock):
        ramp = _ramp(name, metrics.unit(name), "client", None, [v, v])
        out.append(replace(ramp, flow="bulk"))
    return out


def _imported() -> Iterator[tuple[str, list[Metric]]]:
    for path in sorted((DATA / "iperf3").glob("*.json")) + sorted((DATA / "flent").glob("*")):
        if path.name.startswith("error_"):
            continue
        yield f"import {path.name}", load_file(path, Options()).metrics


def _all_produced() -> list[tuple[str, Metric]]:
    found = [(what, m) for what, ms in _test_runs() for m in ms]
    found += [("samplers", m) for m in sampler_metrics(_sampler_series(), window=(0.0, 20.0))]
    found += [("rfc6349", m) for m in rfc6349.figures(
        _sampler_series(), (0.0, 20.0), goodput={None: 18e6}, ideal={None: 19.1e6})]
    found += [(what, m) for what, ms in _imported() for m in ms]
    categories = [c.name for c in analyze.load_categories()]
    found += [("profile", Metric(f"profile.{c}", 10.0, "%"))
              for c in (*categories, analyze.OTHER_KERNEL, analyze.USER)]
    return found


def test_every_produced_metric_is_registered_with_its_unit() -> None:
    produced = _all_produced()
    names = {m.name for _, m in produced}
    # The fixtures reach every kind of figure: a sampler, a profile, both directions.
    assert {"goodput_up", "throughput_p5_down", "wire.dropped_queue", "cpu.softirq",
            "qdisc.backlog_bytes_max", "tcp.retrans_segs", "iface.rx_bps", "latency_increase",
            "owd_up_median", "loss_down", "jain_index", "host_share", "web_ttfb_p95",
            "web_load_stddev", "web_failed", "sampler.cpu", "tcp.srtt", "tcp.delivery_rate",
            "tcp_efficiency", "buffer_delay_pct", "transfer_time_ratio"} <= names
    unknown = sorted({f"{m.name} (from {what})" for what, m in produced
                      if metrics.find(m.name) is None})
    assert not unknown, f"metrics missing from hoplab/metrics.py: {unknown}"
    wrong = sorted({f"{m.name}: stored in {m.unit!r}, registered as "
                    f"{metrics.lookup(m.name).unit!r}" for _, m in produced
                    if metrics.lookup(m.name).unit != m.unit})
    assert not wrong


def test_every_registered_metric_says_which_way_is_better() -> None:
    for d in metrics.all_metrics():
        assert d.better in ("higher", "lower", "neutral"), d
        assert d.label and d.unit, d


def test_wire_queue_drops_get_a_verdict() -> None:
    assert metrics.better("wire.dropped_queue") == "lower"


def test_family_members_have_their_own_name_and_label() -> None:
    d = metrics.lookup("profile.wireguard")
    assert (d.name, d.label, d.unit, d.better) == ("profile.wireguard", "profile wireguard",
                                                   "%", "neutral")
    with pytest.raises(metrics.UnknownMetric):
        metrics.lookup("profile.")


def test_unknown_metric_raises_on_lookup_but_renders_by_its_raw_name() -> None:
    with pytest.raises(metrics.UnknownMetric, match="no_such_figure"):
        metrics.lookup("no_such_figure")
    assert metrics.find("no_such_figure") is None
    assert metrics.label("no_such_figure") == "no_such_figure"
    assert metrics.unit("no_such_figure", "ms") == "ms"
    assert metrics.better("no_such_figure") is None


def test_registering_a_name_twice_differently_is_refused() -> None:
    with pytest.raises(ValueError, match="goodput registered twice"):
        metrics.register(metrics.MetricDef("goodput", "bit/s", "rate", "lower"))
    metrics.register(metrics.lookup("goodput"))      # the same again is harmless


def _run(run_id: int, value: float, name: str = "mystery") -> RunRecord:
    return RunRecord(experiment="e", test="t", kind="tcp", repetition=run_id, variant={},
                     labels={"fw": "a" if run_id <= 5 else "b"}, started_at=0.0,
                     status="ok", metrics=[Metric(name, value, "widgets")], id=run_id)


def test_an_unknown_stored_metric_gets_no_verdict_a_warning_and_renders_raw() -> None:
    a = [_run(i, 10.0 + i / 10) for i in range(1, 6)]
    b = [_run(i, 20.0 + i / 10) for i in range(6, 11)]
    (group,) = compare_groups(a, b).groups
    (row,) = group.metrics
    assert row.verdict == "n/a" and row.unit == "widgets"
    assert any("mystery is not in hoplab's metric registry" in w for w in group.warnings)
    html = run_tables(a[0])
    assert "<td class=\"\">mystery</td>" in html and "10.1 widgets" in html


def test_every_figure_a_view_names_is_registered() -> None:
    from hoplab.render import run_view, summary
    from hoplab.render.headline import HEADLINE

    named = {n for names in HEADLINE.values() for n in names}
    named |= {*run_view.FLOW_COLUMNS, *run_view.IFACE_COLUMNS, *run_view.QDISC_COLUMNS,
              *run_view.CPU_COLUMNS, *getattr(summary, "FLOW_FIGURES", ())}
    assert sorted(n for n in named if metrics.find(n) is None) == []
