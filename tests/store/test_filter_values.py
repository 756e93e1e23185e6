"""What a selection that matched nothing could have named: Store.filter_values,
label_keys and metric_names (analysis/select.py, `hoplab trend`), on SQLite and
PostgreSQL, and the messages built on them."""

from __future__ import annotations

import pytest

from hoplab.analysis.select import check, select
from hoplab.errors import UsageError
from hoplab.record import Metric
from hoplab.store import open_store
from tests.helpers.runs import make_run


def test_values_keys_and_metric_names(store_url: str) -> None:
    with open_store(store_url) as store:
        for version, wg in (("v1", False), ("v2", True), ("v10", True)):
            run = make_run(labels={"version": version}, variant={"wg": wg}, goodput=1.0)
            run.metrics.append(Metric("cpu.softirq", 5.0, "%", node="r1", key="all"))
            store.save_run(run)
        store.save_run(make_run("ping", kind="ping", status="failed", rtt_median=1.0,
                                labels={"note": "cable"}))

        # In the database's order (its collation decides): a message sorts them itself.
        assert sorted(store.filter_values("version", limit=10)) == ["v1", "v10", "v2"]
        assert len(set(store.filter_values("version", limit=2))) == 2
        assert sorted(store.filter_values("wg", limit=10)) == ["False", "True", "false",
                                                                "true"]
        assert sorted(store.filter_values("test", limit=10)) == ["bulk", "ping"]
        assert sorted(store.filter_values("status", limit=10)) == ["failed", "ok"]
        assert store.filter_values("id", limit=2) == ["1", "2"]
        assert store.filter_values("colour", limit=10) == []
        assert sorted(store.label_keys(limit=10)) == ["note", "version", "wg"]
        assert store.metric_names() == ["cpu.softirq", "goodput", "rtt_median"]
        assert store.metric_names({"status": "ok"}) == ["cpu.softirq", "goodput"]
        assert store.metric_names({"version": "v2"}, runs=1) == ["cpu.softirq", "goodput"]

        with pytest.raises(UsageError) as exc:
            select(store, "version=v3")
        assert str(exc.value).endswith("(version takes v1, v2, v10)")   # natural order
        with pytest.raises(UsageError) as exc:
            check(store, {"wg": "yes", "colour": "red"})
        assert "wg takes false, true; no run has colour; the keys are the columns " \
               "experiment, experiment_id, id, kind, status, test and the runs' labels and " \
               "variant keys: note, version, wg)" in str(exc.value)
        check(store, {"version": "v1", "test": "ping"})     # each holds: no error
