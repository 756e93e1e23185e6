"""What `hoplab run` says as it goes where no bar is drawn, and when interrupted
(issue 27: six minutes of silence in a CI log; "0 finished runs kept" beside "stored run
38 (interrupted)")."""

from __future__ import annotations

from hoplab.cli.run import finished_line, interrupted_line
from hoplab.record import Metric, RunRecord


def _run(run_id: int, status: str, goodput: float | None = None) -> RunRecord:
    rec = RunRecord(experiment="quickstart", test="tcp-up", kind="tcp", repetition=2,
                    variant={"hops": 4}, labels={}, started_at=0.0, duration_s=5.4,
                    status=status,  # type: ignore[arg-type]
                    metrics=[] if goodput is None else [Metric("goodput", goodput, "bit/s")])
    rec.id = run_id
    return rec


def test_a_line_per_finished_run_with_its_headline() -> None:
    assert finished_line(3, 24, _run(7, "ok", 95.2e6)) == (
        "run 3/24 ok: tcp-up hops=4 rep 2 (run 7, 5 s): goodput 95.2 Mbit/s")
    assert finished_line(4, 24, _run(8, "failed")) == (
        "run 4/24 failed: tcp-up hops=4 rep 2 (run 8, 5 s)")


def test_the_interrupt_says_both_truths_in_one_line() -> None:
    assert interrupted_line([_run(38, "interrupted")]) == (
        "hoplab: interrupted; 0 finished runs kept, run 38 cut short and stored as "
        "interrupted; the lab is down")
    assert interrupted_line([_run(1, "ok"), _run(2, "failed")]) == (
        "hoplab: interrupted; 2 finished runs kept; the lab is down")


def test_a_worker_names_its_labels_as_a_selection_does() -> None:
    from hoplab.fleet.queue.worker import BenchConfig, describe

    assert describe(BenchConfig("nuone", {}, "hoplab-nuone")) == (
        "bench nuone, lab hoplab-nuone")
    assert describe(BenchConfig("erx-1", {"device": "erx", "site": "lab2"}, "l", slot=2)) == (
        "bench erx-1#2 (device=erx site=lab2), lab l")


def test_the_fleet_doc_works_on_a_fresh_debian_as_root() -> None:
    # A fresh Debian 12 has no sudo: runuser (util-linux) is there.
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    for doc in sorted(docs.glob("*.md")):
        assert "sudo -u postgres" not in doc.read_text(), doc.name
    assert "runuser -u postgres -- createdb" in (docs / "fleet.md").read_text()


def test_a_runs_page_puts_its_figures_before_what_the_run_was(tmp_path: object) -> None:
    # Issue 27: metadata and the tool list first, the figures 1,400 px down.
    from pathlib import Path

    from hoplab.store import open_store
    from hoplab.web.app import Dashboard
    from tests.helpers.runs import make_run

    db = Path(str(tmp_path)) / "r.db"
    with open_store(str(db)) as store:
        rid = store.save_run(make_run(goodput=9.5e7))
        page = Dashboard(store).handle(f"/run/{rid}").body.decode()
    charts, figures, tools = (page.index(s) for s in ('id="charts"', "<h3>figures</h3>",
                                                       "<th>tools</th>"))
    assert charts < figures < tools


def test_a_fleets_bench_and_job_labels_are_no_version_history() -> None:
    # Issue 27: a fleet store's report led with "no change point by fleet_job".
    from hoplab.analysis.trend import series_key, trends_of_runs
    from tests.helpers.runs import make_run

    runs = [make_run(rep=1, labels={"bench": f"b{i % 3}", "fleet_job": str(i)},
                     goodput=9e7 + i) for i in range(12)]
    assert series_key(runs) is None and trends_of_runs(runs) == []
    for i, r in enumerate(runs):
        r.labels["version"] = f"v{i // 2}"
    assert series_key(runs) == "version"
