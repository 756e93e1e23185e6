"""Store.metric_values: the runs that have one metric, with its value, in one query
(`hoplab trend` reads thousands of runs through it), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from hoplab.errors import UsageError
from hoplab.record import Metric
from hoplab.store import open_store
from tests.helpers.runs import make_run


def test_values_of_one_metric_by_flow_node_and_filters(store_url: str) -> None:
    with open_store(store_url) as store:
        ids = []
        for i, version in enumerate(["v1", "v2", "v2", "v3"]):
            run = make_run(labels={"version": version}, variant={"hops": i}, goodput=10.0 + i,
                           flows={"f1": 1.0 + i})
            run.metrics.append(Metric("cpu.softirq", 5.0 + i, "%", node="r1", key="all"))
            ids.append(store.save_run(run))
        ids.append(store.save_run(make_run("ping", kind="ping", rtt_median=1.0)))
        ids.append(store.save_run(make_run(status="failed", goodput=0.0)))

        found = store.metric_values("goodput")
        assert [(r.id, v) for r, v in found] == [
            (ids[0], 10.0), (ids[1], 11.0), (ids[2], 12.0), (ids[3], 13.0), (ids[5], 0.0)]
        summary, _ = found[1]
        assert summary.labels == {"version": "v2"} and summary.variant == {"hops": 1}
        assert summary.test == "bulk" and summary.metrics == {}
        assert [v for _, v in store.metric_values("goodput", flow="f1")] == [1.0, 2.0, 3.0,
                                                                             4.0]
        assert [v for _, v in store.metric_values("cpu.softirq", node="r1", key="all")] == [
            5.0, 6.0, 7.0, 8.0]
        assert store.metric_values("cpu.softirq") == []      # no whole-run figure of it
        assert [v for _, v in store.metric_values(
            "goodput", {"version": "v2", "status": "ok"})] == [11.0, 12.0]
        assert [v for _, v in store.metric_values("goodput", {"hops": "3"})] == [13.0]
        assert [v for _, v in store.metric_values("goodput", {"id": str(ids[3])})] == [13.0]
        # An id that is none is refused, naming it (hoplab.numbers), as `runs --filter`.
        with pytest.raises(UsageError, match="filter id 'x': expected a whole number"):
            store.metric_values("goodput", {"id": "x"})
        assert len(store.metric_values("goodput", limit=2)) == 2
