"""Several runs saved at once (`hoplab import`) are saved in one transaction: all or none."""

from __future__ import annotations

import pytest

from hoplab.errors import HoplabError
from hoplab.record import Metric
from hoplab.store import Store
from tests.helpers.runs import make_run


def test_runs_saved_together_are_all_saved(store: Store) -> None:
    runs = [make_run(goodput=1.0), make_run("other", goodput=2.0)]
    ids = store.save_runs(runs)
    assert [r.id for r in runs] == ids
    assert [(r.id, r.test) for r in store.list_runs()] == list(zip(ids, ["bulk", "other"],
                                                                   strict=True))


def test_a_run_the_database_refuses_leaves_none_of_them_saved(store: Store) -> None:
    good = make_run(goodput=1.0)
    # Passes every check before the transaction; the database refuses it at its insert
    # (metrics.unit is NOT NULL), after the first run's rows went in.
    bad = make_run("broken", goodput=2.0)
    bad.metrics.append(Metric("loss", 0.0, None))  # type: ignore[arg-type]
    with pytest.raises(HoplabError, match="cannot save 2 runs \\(none was saved\\)"):
        store.save_runs([good, bad])
    assert store.list_runs() == []
    assert good.id is None and bad.id is None
    store.save_runs([good])
    assert [r.test for r in store.list_runs()] == ["bulk"]


def test_a_run_that_fails_its_check_stops_all_before_any_is_written(store: Store) -> None:
    twice = make_run("twice", goodput=1.0)
    twice.metrics.append(Metric("goodput", 2.0, "bit/s"))
    with pytest.raises(HoplabError, match="cannot save run wan/twice: two metrics"):
        store.save_runs([make_run(goodput=1.0), twice])
    assert store.count_runs() == 0
