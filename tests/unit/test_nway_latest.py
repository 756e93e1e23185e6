"""An n-way matrix (hops 1, 2, 4) gets each value against the first, and the dashboard's
home leads with it when no series has changed (issue 27: the quickstart's store read
"no change over time: the 10 series are too short to tell yet" and nothing else, while
`compare` on it found +109 %)."""

from __future__ import annotations

from pathlib import Path

from hoplab.record import RunRecord
from hoplab.render.report import build_report, comparisons
from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.runs import make_run

# goodput by hops: 1 hop twice as fast as 2 and 4 (as the old quickstart's 1 hop, which
# had no bottleneck), 4 runs a side, a spread of 1 %.
LEVEL = {1: 200e6, 2: 95e6, 4: 94e6}


def _runs() -> list[RunRecord]:
    runs = []
    for i, hops in enumerate((1, 2, 4) * 4):
        r = make_run("tcp-up", rep=i // 3 + 1, variant={"hops": hops},
                     started_at=1_763_800_000.0 + i,
                     goodput=LEVEL[hops] * (1 + 0.01 * (i % 4 - 1.5) / 1.5))
        r.experiment_id = "e1"
        runs.append(r)
    return runs


def test_each_value_against_the_first() -> None:
    every, why = comparisons(_runs())
    assert why == "" and len(every) == 2
    assert [(c.groups[0].a_label, c.groups[0].b_label) for c in every] == [
        ("hops=1", "hops=2"), ("hops=1", "hops=4")]
    verdicts = [{m.metric: m.verdict for m in c.groups[0].metrics}["goodput"] for c in every]
    assert verdicts == ["worse", "worse"]


def test_the_home_leads_with_the_latest_experiments_n_way_comparison(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as store:
        for r in _runs():
            store.save_run(r)
        body = Dashboard(store).handle("/").body.decode()
        ids = [r.id for r in store.list_runs({})]
        report = build_report([store.get_run(i) for i in ids], "r.db")
    latest, changes = body.index('<section id="latest">'), body.index('id="answer"')
    assert latest < changes
    assert "hops=2 against hops=1" in body and "hops=4 against hops=1" in body
    assert body.count('id="headline"') == 1
    assert "hops=2 against hops=1" in report and "hops=4 against hops=1" in report
