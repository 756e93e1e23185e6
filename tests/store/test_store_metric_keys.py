"""A run with two metrics of one key is refused when it is saved; old names are upgraded
when a run is read back."""

from __future__ import annotations

import pytest

import hoplab.store.store as store_module
from hoplab.errors import HoplabError
from hoplab.record import Metric, RunRecord
from hoplab.store import Store


def _run(metrics: list[Metric], kind: str = "custom") -> RunRecord:
    return RunRecord(experiment="e", test="mix", kind=kind, repetition=1, variant={},
                     labels={}, started_at=1.0, metrics=metrics)


def test_two_metrics_with_one_key_are_refused_and_nothing_is_saved(store: Store) -> None:
    run = _run([Metric("udp_jitter", 1.0, "ms"), Metric("goodput", 5.0, "bit/s"),
                Metric("udp_jitter", 2.0, "ms")])
    with pytest.raises(HoplabError, match=r"cannot save run e/mix: .*udp_jitter"):
        store.save_run(run)
    assert store.list_runs() == []


def test_one_name_on_two_flows_is_two_keys(store: Store) -> None:
    run = _run([Metric("loss", 1.0, "%", flow="a"), Metric("loss", 2.0, "%", flow="b"),
                Metric("loss", 1.5, "%")])
    assert store.get_run(store.save_run(run)).metric("loss", flow="b") == 2.0


def test_a_run_saved_with_jitter_reads_back_with_todays_names(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # As hoplab saved a custom test with a UDP flow and one ping stream before the split.
    run = _run([Metric("jitter", 0.1, "ms", flow="mix.voip"),
                Metric("jitter", 3.0, "ms", flow="mix.ping"),
                Metric("jitter", 0.1, "ms"), Metric("jitter", 3.0, "ms")])
    run.metadata = {"test": {"flows": [{"name": "mix.voip", "kind": "udp"},
                                       {"name": "mix.ping", "kind": "ping"}]}}
    # Saved the way an older hoplab wrote it (the duplicate check came with the split).
    monkeypatch.setattr(store_module, "check_metric_keys", lambda _run: None)
    run_id = store.save_run(run)
    monkeypatch.undo()
    back = store.get_run(run_id)
    assert back.metric("udp_jitter", flow="mix.voip") == 0.1
    assert back.metric("rtt_jitter", flow="mix.ping") == 3.0
    assert (back.metric("udp_jitter"), back.metric("rtt_jitter")) == (0.1, 3.0)
    assert back.metric("jitter") is None

