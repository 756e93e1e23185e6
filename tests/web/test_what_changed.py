"""The dashboard's home is "what changed" (issue 21): every series' latest change point
and latest runs against their baseline, the largest regression first, each as `hoplab
trend` and `hoplab compare` say it; the runs list moved to /runs."""

from __future__ import annotations

import json
import re
import shlex
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from hoplab.analysis.changes import ChangeIndex
from hoplab.cli.main import main
from hoplab.kinds import HEADLINES
from hoplab.store import Store, open_store
from hoplab.web.app import Dashboard
from tests.helpers.runs import make_run
from tests.helpers.versions import STEPS, add_history, history_store


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("history") / "runs.db"
    history_store(path)
    return path


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr class="change".*?</tr>', page, re.S)


def _cells(row: str) -> list[list[str]]:
    """Each cell's words, as the page shows them."""
    return [unescape(re.sub(r"<[^>]+>", " ", c)).split()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def _links(row: str) -> dict[str, str]:
    return {unescape(text): unescape(href)
            for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', row)}


def test_the_newest_step_of_the_history_is_the_first_row(
        history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(str(history), read_only=True) as store:
        dash = Dashboard(store)
        page = dash.handle("/").body.decode()
        (row,) = _rows(page)                    # one series, one changed figure
        cells = _cells(row)
        assert cells[0] == ["worse"] and cells[1] == ["goodput"]
        assert cells[2] == ["nat", "/", "nat-bulk"]
        assert cells[3] == ["v45", "→", "v46", "change", "point"]
        found = dash.what_changed()
        assert found is not None
        (change,) = found.changes
        # The -49 % step, measured on the stretches around it, its interval around it.
        assert change.ci_pct[0] < STEPS[46] < change.ci_pct[1]
        assert change.change_pct == pytest.approx(STEPS[46], abs=2)
        answer = re.search(r'<p id="answer" class="answer">(.*?)</p>', page).group(1)  # type: ignore[union-attr]
        assert unescape(answer).startswith(
            f"nat / nat-bulk: goodput {change.change_pct:+.1f} % "
            f"[{change.ci_pct[0]:+.1f}, {change.ci_pct[1]:+.1f}] worse, v45 → v46; "
            "in 1 of 1 series")
        v45 = [r.id for r in store.list_runs({"version": "v45"})]
        v46 = [r.id for r in store.list_runs({"version": "v46"})]

        # The trend, with the step marked; the comparison of the two values' runs.
        links = _links(row)
        trend = urlsplit(links["trend"])
        assert trend.path == "/trend"
        assert parse_qs(trend.query) == {
            "metric": ["goodput"], "by": ["version"], "order": ["natural"],
            "experiment": ["nat"], "test": ["nat-bulk"], "step": ["v46"]}
        marked = dash.handle(links["trend"]).body.decode()
        assert re.search(r'<span id="step" class="step">v45 → v46</span>', marked)
        compare = parse_qs(urlsplit(links["compare"]).query)
        assert compare == {"a": [f"{v45[0]}-{v45[-1]}"], "b": [f"{v46[0]}-{v46[-1]}"]}
        assert dash.handle(links["compare"]).status == 200
        bisect = unescape(re.search(r'<code class="cmd">(.*?)</code>', row).group(1))  # type: ignore[union-attr]
        assert shlex.split(bisect)[1:] == [
            "hoplab", "bisect", "run", "EXPERIMENT.toml", "--repo", "REPO", "--good", "v45",
            "--bad", "v46", "--metric", "goodput"]

        doc = json.loads(dash.handle("/api/changes").body)
        assert doc["series"] == 1 and doc["cannot_tell"] == 0 and doc["steady"] == []
        (first,) = doc["changes"]
        assert (first["before"], first["after"], first["verdict"], first["source"]) == (
            "v45", "v46", "worse", "step")
        assert first["trend"] == links["trend"] and first["compare"] == links["compare"]
        assert first["change_pct"] == change.change_pct

    # What `hoplab trend` says of the same series, figure for figure.
    assert main(["trend", "goodput", "--by", "version", "--filter", "experiment=nat",
                 "--filter", "test=nat-bulk", "--db", str(history), "--json"]) == 0
    last = json.loads(capsys.readouterr().out)["change_points"][-1]
    assert (last["before"], last["after"]) == ("v45", "v46")
    assert (last["change_pct"], tuple(last["ci_pct"]), last["p"]) == (
        change.change_pct, change.ci_pct, change.p)
    assert (last["median_before"], last["median_after"]) == (
        change.median_before, change.median_after)


def test_a_store_without_a_step_says_no_change(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    history_store(path, steps={}, versions=12)
    with open_store(str(path), read_only=True) as store:
        page = Dashboard(store).handle("/").body.decode()
    assert '<p id="answer" class="answer">no change in 1 series</p>' in page
    assert not _rows(page)
    assert "<summary>1 series with no change</summary>" in page


def _scheduled(store: Store, night: int, level: float, rng: np.random.Generator) -> list[int]:
    """One night of a scheduled series: five repetitions of one invocation."""
    ids = []
    for rep in range(1, 6):
        run = make_run("bulk", rep=rep, labels={"device": "ap1"},
                       started_at=1.7e9 + 86400 * night + rep,
                       goodput=float(rng.normal(level, level * 0.02)))
        run.experiment_id = f"night-{night}"
        ids.append(store.save_run(run))
    return ids


def test_a_regression_in_a_scheduled_series_is_on_top_at_the_next_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.db"
    rng = np.random.default_rng(4)
    with open_store(str(path)) as store:
        for night in range(1, 4):
            _scheduled(store, night, 100e6, rng)
        dash = Dashboard(store)
        assert "no change in 1 series" in dash.handle("/").body.decode()
        before = _scheduled(store, 4, 100e6, rng)
        after = _scheduled(store, 5, 70e6, rng)          # tonight: -30 %
        page = dash.handle("/").body.decode()            # the very next load
        row = _rows(page)[0]
        cells = _cells(row)
        assert cells[0] == ["worse"] and cells[1] == ["goodput"]
        assert cells[3] == ["night-4", "→", "night-5", "latest", "runs"]
        found = dash.what_changed()
        assert found is not None
        change = found.changes[0]
        assert (change.runs_before, change.runs_after) == (tuple(before), tuple(after))
        # Kept up to date, the index says what a fresh look at the store says.
        assert ChangeIndex(HEADLINES).refresh(store).changes == found.changes
        assert "ordered by time" in row                  # no revisions to bisect

    # Judged as `hoplab compare` judges the two nights' runs.
    assert main(["compare", f"{before[0]}-{before[-1]}", f"{after[0]}-{after[-1]}",
                 "--db", str(path), "--json", "--metric", "goodput"]) == 0
    (m,) = json.loads(capsys.readouterr().out)["groups"][0]["metrics"]
    assert m["verdict"] == "worse"
    assert (m["change_pct"], m["ci_low_pct"], m["ci_high_pct"], m["p_value"]) == (
        change.change_pct, *change.ci_pct, change.p)


def test_runs_that_name_no_invocation_are_a_series_by_start_time(tmp_path: Path) -> None:
    # Imported runs, say: no experiment_id, no version; 20 at 100 Mbit/s, then 20 at 50.
    path = tmp_path / "runs.db"
    rng = np.random.default_rng(7)
    with open_store(str(path)) as store:
        for i in range(40):
            level = 100e6 if i < 20 else 50e6
            store.save_run(make_run(rep=1, started_at=1.7e9 + 600 * i,
                                    goodput=float(rng.normal(level, level * 0.02))))
        dash = Dashboard(store)
        page = dash.handle("/").body.decode()
        (row,) = _rows(page)
        assert _cells(row)[0] == ["worse"]
        trend = _links(row)["trend"]
        assert parse_qs(urlsplit(trend).query)["by"] == ["started_at"]
        # The trend it links to finds the same step, and marks it.
        marked = dash.handle(trend).body.decode()
        assert len(re.findall(r'<span id="step" class="step">', marked)) == 1


def test_series_are_split_by_labels_and_short_ones_counted(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with open_store(str(path)) as store:
        add_history(store)                                  # the steps, on no device
        add_history(store, steps={}, versions=8, labels={"device": "ap2"}, seed=3)
        for rep in range(1, 3):                             # too short to tell
            store.save_run(make_run("up", rep=rep, labels={"version": "v1"}, goodput=1e6))
        found = ChangeIndex(HEADLINES).refresh(store)
    assert (found.series, found.cannot_tell, found.runs) == (3, 1, 180 + 24 + 2)
    assert [c.series.title for c in found.changes] == ["nat / nat-bulk"]
    assert [s.title for s in found.steady] == ["nat / nat-bulk device=ap2"]


def test_old_links_to_the_runs_list_still_work(history: Path) -> None:
    with open_store(str(history), read_only=True) as store:
        dash = Dashboard(store)
        for old, new in (("/?version=v3", "/runs?version=v3"), ("/?page=2", "/runs?page=2"),
                         ("/?q=version%3Dv3", "/runs?q=version%3Dv3")):
            resp = dash.handle(old)
            assert (resp.status, resp.headers["Location"]) == (301, new)
        runs = dash.handle("/runs?version=v3").body.decode()
        assert runs.count('href="/run/') == 3
        assert '<a href="/runs">runs</a>' in dash.handle("/").body.decode()
