"""`hoplab baseline` (issue 21): a series' latest runs judged against the pinned value
instead of the value before them, on the dashboard's home and in the report, as `hoplab
compare` judges the two values' runs; unpinned, the home judges as before."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from hoplab.cli.main import main
from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.versions import history_store
from tests.web.test_what_changed import _cells, _rows

# Twelve versions of four repetitions (4 + 4 runs reach the rank test's level), goodput
# 30 % lower from v8: v12 against v11 is no change, against a pinned v2 it is -30 %.
STEP = {8: -30.0}


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("baseline") / "runs.db"
    history_store(path, versions=12, reps=4, steps=STEP)
    return path


def _sources(page: str) -> list[tuple[str, ...]]:
    return [tuple(_cells(r)[3]) for r in _rows(page)]


def test_a_pinned_baseline_judges_the_latest_runs_against_it(
        store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", str(store_path)]
    with open_store(str(store_path), read_only=True) as store:
        dash = Dashboard(store)
        # Unpinned: the step, and nothing between v11 and v12.
        assert _sources(dash.handle("/").body.decode()) == [
            ("v7", "→", "v8", "change", "point")]

        assert main(["baseline", "experiment=nat,version=v2", *db]) == 0
        said = capsys.readouterr().out
        assert re.fullmatch(r"baseline \d+: nat / nat-bulk by version: v2 \(runs 5-8\)\n",
                            said), said
        page = dash.handle("/").body.decode()        # the same dashboard, no new run
        assert sorted(_sources(page)) == sorted([
            ("v7", "→", "v8", "change", "point"),
            ("v2", "→", "v12", "latest", "runs", "against", "the", "pinned", "baseline")])
        found = dash.what_changed()
        assert found is not None
        (pinned,) = [c for c in found.changes if c.source == "baseline"]
        assert pinned.verdict == "worse" and pinned.change_pct == pytest.approx(-30, abs=4)

        # As `hoplab compare` judges v2's runs against v12's.
        assert main(["compare", "experiment=nat,version=v2", "experiment=nat,version=v12",
                     "--metric", "goodput", "--json", *db]) == 0
        (m,) = json.loads(capsys.readouterr().out)["groups"][0]["metrics"]
        assert (m["verdict"], m["change_pct"], m["ci_low_pct"], m["ci_high_pct"]) == (
            "worse", pinned.change_pct, *pinned.ci_pct)

        # The report of the history leads with it.
        out = tmp_path / "r.html"
        assert main(["report", "experiment=nat", "-o", str(out), *db]) == 0
        capsys.readouterr()
        lead = re.search(r'<p class="answer" id="pinned">(.*?)</p>', out.read_text())
        assert lead is not None
        assert unescape(lead.group(1)) == (
            f"against the pinned baseline: nat / nat-bulk: goodput {pinned.change_pct:+.1f} % "
            f"[{pinned.ci_pct[0]:+.1f}, {pinned.ci_pct[1]:+.1f}] worse, v2 → v12")

        # Listed, then removed: the home judges v12 against v11 again.
        assert main(["baseline", "--list", "--json", *db]) == 0
        (listed,) = json.loads(capsys.readouterr().out)
        assert (listed["series"], listed["by"], listed["value"], listed["runs"]) == (
            "nat / nat-bulk", "version", "v2", [5, 6, 7, 8])
        assert main(["baseline", "--remove", str(listed["id"]), *db]) == 0
        assert "removed baseline" in capsys.readouterr().out
        assert _sources(dash.handle("/").body.decode()) == [
            ("v7", "→", "v8", "change", "point")]


def test_a_baseline_is_one_value_of_each_series(
        store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", str(store_path)]
    assert main(["baseline", "1-8", *db]) == 2
    err = capsys.readouterr().err
    assert "holds 2 values of version of series nat / nat-bulk (v1, v2)" in err
    assert "add version=... to the selection" in err
    assert main(["baseline", "--list", *db]) == 0
    assert "no baselines in" in capsys.readouterr().out
