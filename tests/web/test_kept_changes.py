"""Each series' judged changes kept in the store (schema 6), so that a dashboard just
started reads them rather than judging every series again: read while the series' last
run, number of runs and baseline are those judged, judged again when any changes, and
what is shown is what judging shows."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from hoplab.analysis.changes import ChangeIndex, keep_judged
from hoplab.cli.main import main
from hoplab.kinds import HEADLINES
from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.runs import make_run
from tests.helpers.versions import STEPS, add_history


def _fresh(db: Path) -> ChangeIndex:
    index = ChangeIndex(HEADLINES)
    with open_store(str(db), read_only=True) as store:
        index.refresh(store)
    return index


def test_kept_judgements_are_read_until_their_series_changes(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with open_store(str(db)) as store:
        add_history(store)
        add_history(store, experiment="lan", steps={}, versions=10, seed=5)
        judged = ChangeIndex(HEADLINES)
        first = judged.refresh(store)
        assert judged.computed == 2 and store.kept_changes() == {}   # a reader keeps none
        assert keep_judged(store, HEADLINES) == 2
    # A dashboard just started reads both, and shows what judging showed.
    with open_store(str(db), read_only=True) as store:
        dash = Dashboard(store)
        found = dash.what_changed()
        assert found is not None and found.changes == first.changes
        assert found.steady == first.steady and found.changes[0].change_pct < STEPS[46] + 2
    assert _fresh(db).computed == 0

    # A run added to one series: that one is judged again, the other read.
    with open_store(str(db)) as store:
        run = make_run("nat-bulk", labels={"version": "v61"}, goodput=200e6)
        run.experiment, run.experiment_id = "nat", "nat-v61"
        store.save_run(run)
    assert _fresh(db).computed == 1
    # A baseline pinned by the command line: that series is judged again (against it)
    # and kept, as a store that keeps nothing judges it.
    assert main(["baseline", "experiment=nat,version=v2", "--db", str(db)]) == 0
    index = _fresh(db)
    assert index.computed == 0
    with open_store(str(db), read_only=True) as store:
        kept = index.refresh(store)
    unkept = _fresh(_without_kept(db, tmp_path / "copy.db"))
    assert unkept.computed == 2
    with open_store(str(tmp_path / "copy.db"), read_only=True) as store:
        assert unkept.refresh(store).changes == kept.changes


def _without_kept(db: Path, copy: Path) -> Path:
    """A copy of the store at `db` that keeps no judgement."""
    with closing(sqlite3.connect(db)) as source, closing(sqlite3.connect(copy)) as dest:
        source.backup(dest)
        dest.execute("DELETE FROM kept_changes")
        dest.commit()
    return copy
