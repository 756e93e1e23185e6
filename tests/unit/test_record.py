"""The run record's own rules: one metric per key; old metric names upgraded."""

from __future__ import annotations

import pytest

from hoplab.record import DuplicateMetric, Metric, RunRecord, check_metric_keys, upgrade_names


def _run(kind: str, metrics: list[Metric], flows: list[tuple[str, str]] | None = None
         ) -> RunRecord:
    meta = {} if flows is None else {"test": {"flows": [{"name": n, "kind": k}
                                                        for n, k in flows]}}
    return RunRecord(experiment="e", test="t", kind=kind, repetition=1, variant={}, labels={},
                     started_at=0.0, metadata=meta, metrics=metrics)


def test_duplicate_key_is_named() -> None:
    run = _run("tcp", [Metric("goodput", 1.0, "bit/s", flow="f", key="up"),
                       Metric("goodput", 2.0, "bit/s", flow="f", key="up")])
    with pytest.raises(DuplicateMetric,
                       match=r"same name, flow, node and key: goodput \(flow=f, key=up\)"):
        check_metric_keys(run)


def test_same_name_on_another_flow_node_or_key_is_fine() -> None:
    check_metric_keys(_run("tcp", [Metric("goodput", 1.0, "bit/s"),
                                   Metric("goodput", 1.0, "bit/s", flow="f"),
                                   Metric("goodput", 1.0, "bit/s", node="n"),
                                   Metric("goodput", 1.0, "bit/s", key="up")]))


@pytest.mark.parametrize(("kind", "new"), [("udp", "udp_jitter"), ("ping", "rtt_jitter"),
                                           ("probe", "rtt_jitter"), ("rrul", "rtt_jitter")])
def test_old_jitter_of_a_kind(kind: str, new: str) -> None:
    run = upgrade_names(_run(kind, [Metric("jitter", 1.0, "ms")]))
    assert [m.name for m in run.metrics] == [new]


def test_old_jitter_of_a_custom_test_follows_its_flows() -> None:
    only_ping = upgrade_names(_run("custom", [Metric("jitter", 1.0, "ms"),
                                              Metric("jitter", 1.0, "ms", flow="p")],
                                   [("p", "ping"), ("b", "tcp")]))
    assert [m.name for m in only_ping.metrics] == ["rtt_jitter", "rtt_jitter"]
    with_udp = upgrade_names(_run("custom", [Metric("jitter", 1.0, "ms")],
                                  [("u", "udp"), ("p", "ping"), ("q", "ping")]))
    assert [m.name for m in with_udp.metrics] == ["udp_jitter"]
