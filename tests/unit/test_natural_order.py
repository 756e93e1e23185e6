"""One order of variants everywhere: natural (v1.9 before v1.10, hops=2 before hops=10)
in summaries, plots, the report, the dashboard and analysis (analysis/order.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.analysis.order import natural_key
from hoplab.analysis.select import select_pair
from hoplab.errors import UsageError
from hoplab.record import Metric, RunRecord
from hoplab.render.plots_dist import box
from hoplab.render.report import build_report
from hoplab.render.summary import summary_rows
from hoplab.store import open_store
from hoplab.web.app import Dashboard

# Stored newest version first: insertion order and text order both put v1.10 first.
VERSIONS = ("v1.10", "v1.9")


def _run(version: str, rep: int) -> RunRecord:
    return RunRecord(experiment="fw", test="bulk", kind="tcp", repetition=rep,
                     variant={"version": version}, labels={}, started_at=1.7e9,
                     metrics=[Metric("goodput", 100e6 + rep * 1e5, "bit/s")])


RUNS = [_run(v, rep) for v in VERSIONS for rep in (1, 2)]


def test_natural_key() -> None:
    values = ["v1.10", "v1.9", "v1.2", "v2.0", "v10", "cpu10", "cpu2", "all"]
    assert sorted(values, key=natural_key) == ["all", "cpu2", "cpu10", "v1.2", "v1.9",
                                               "v1.10", "v2.0", "v10"]
    assert sorted([10, 2, "x", None, 1.5, True, False], key=natural_key) == [
        1.5, 2, 10, False, True, "x", None]


def test_summary_rows() -> None:
    assert [r["variant"] for r in summary_rows(RUNS)] == ["version=v1.9", "version=v1.10"]


def test_box_plot_axis() -> None:
    fig = box(RUNS, "goodput")
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["version=v1.9", "version=v1.10"]


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    with open_store(path) as store:
        for r in RUNS:
            store.save_run(r)
    return path


def test_report_takes_the_older_version_as_a(db: str) -> None:
    with open_store(db) as store:
        text = build_report([store.get_run(r.id) for r in store.list_runs()], "store")
    assert "B = version=v1.10 against A = version=v1.9" in text


def test_dashboard_facets_and_selection_hints(db: str) -> None:
    with open_store(db) as store:
        page = Dashboard(store).handle("/runs").body.decode()
        assert page.index(">v1.9</a>") < page.index(">v1.10</a>")
        with pytest.raises(UsageError, match=r"version takes v1\.9, v1\.10"):
            select_pair(store, "version=v3", "1")
