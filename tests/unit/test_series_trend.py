"""trend(): a metric's median per start time, version or variant value."""

from __future__ import annotations

from pathlib import Path

from hoplab.analysis.series_trend import trend
from hoplab.store import open_store
from tests.helpers.runs import make_run


def test_trend_by_label_variant_and_time(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "t.db")) as store:
        for i, (version, hops, goodput) in enumerate([
                ("v1.10", 1, 30.0), ("v1.9", 1, 10.0), ("v1.9", 2, 20.0), ("v1.9", 1, 12.0),
                ("v2.0", 10, 50.0)]):
            store.save_run(make_run(variant={"hops": hops}, labels={"version": version},
                                    started_at=1000.0 - i, goodput=goodput,
                                    flows={"f1": goodput / 2}))
        store.save_run(make_run(labels={"version": "v3"}, status="failed", goodput=0.0))
        store.save_run(make_run("ping", labels={"version": "v1.9"}, rtt_median=3.0))
        assert trend(store, "goodput", {"test": "bulk"}, by="version") == [
            ("v1.9", 12.0, 3), ("v1.10", 30.0, 1), ("v2.0", 50.0, 1)]
        assert trend(store, "goodput", {}, by="hops") == [
            (1.0, 12.0, 3), (2.0, 20.0, 1), (10.0, 50.0, 1)]
        assert trend(store, "goodput@f1", {"version": "v1.9"}, by="hops") == [
            (1.0, 5.5, 2), (2.0, 10.0, 1)]
        by_time = trend(store, "goodput", {"test": "bulk"})
        assert [x for x, _, _ in by_time] == [996.0, 997.0, 998.0, 999.0, 1000.0]
        assert trend(store, "goodput", {"status": "failed"}, by="version") == [("v3", 0.0, 1)]
        assert trend(store, "jitter", {}, by="version") == []
