"""`hoplab trend` end to end: the real command on a real SQLite store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hoplab.cli.main import main
from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.runs import make_run

HOPLAB = str(Path(sys.executable).with_name("hoplab"))
VERSIONS = [f"v1.{i}" for i in range(30)]          # v1.2 before v1.10: natural order
STEP_AT = 16                                         # v1.16 is the first 20 % lower


def _fill(path: str, versions: list[str], *, label: str = "version",
          times: list[float] | None = None) -> None:
    rng = np.random.default_rng(3)
    with open_store(path) as store:
        for i, version in enumerate(versions):
            level = 100e6 * (0.8 if i >= STEP_AT else 1.0)
            for rep in range(1, 4):
                store.save_run(make_run(
                    rep=rep, labels={label: version},
                    started_at=(times[i] if times else 1_700_000_000.0 + i) + rep,
                    goodput=float(rng.normal(level, level * 0.05))))
        # Another test, left out by --filter test=bulk, and a failed run, always left out.
        store.save_run(make_run("other", labels={label: versions[0]}, goodput=1.0))
        store.save_run(make_run(labels={label: versions[1]}, status="failed", goodput=1.0))


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    _fill(path, VERSIONS)
    return path


def _hoplab(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOPLAB_DB": ""}
    return subprocess.run([HOPLAB, *argv], capture_output=True, text=True, env=env,
                          check=False, timeout=120)


def test_json_has_every_run_and_the_step(db: str, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    proc = _hoplab("trend", "goodput", "--db", db, "--filter", "test=bulk", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # The issue's format, plus the power figures, why there are none, the detector and
    # the series' variant (keys added, none renamed).
    assert set(doc) == {"metric", "points", "change_points", "power", "reason", "detector",
                        "variant"}
    assert (doc["reason"], doc["detector"], doc["variant"]) == (None, "edivisive", {})
    assert doc["metric"] == "goodput"
    assert [p["value"] for p in doc["points"]] == VERSIONS
    assert all(len(p["runs"]) == 3 for p in doc["points"])
    first = doc["points"][0]
    assert first["median"] == pytest.approx(np.median([r["value"] for r in first["runs"]]))
    (cp,) = doc["change_points"]
    assert set(cp) == {"before", "after", "median_before", "median_after", "change_pct",
                       "ci_pct", "p", "detectable_pct"}
    assert (cp["before"], cp["after"]) == ("v1.15", "v1.16")
    assert cp["change_pct"] == pytest.approx(-20, abs=2.5)
    assert cp["ci_pct"][0] < -20 < cp["ci_pct"][1]
    assert cp["median_before"] == pytest.approx(100e6, rel=0.03)
    assert cp["p"] < 1e-6

    power = doc["power"]
    assert power["noise_cv"] == pytest.approx(0.05, abs=0.01)      # 5.8 % measured
    assert (power["values_per_stretch"], power["repetitions_per_value"]) == (15, 3)
    assert power["step_pct"] == 5 and power["power"] == 0.8
    # What the text says, and the rank test's power in simulation: two stretches of 15
    # values x 3 repetitions at the detector's level (0.0005 over the 27 splits of 30
    # values) find a step of detectable_pct 80 % of the time.
    assert power["alpha"] == pytest.approx(0.0005 / 27)
    assert main(["trend", "goodput", "--db", db, "--filter", "test=bulk"]) == 0
    text = capsys.readouterr().out
    assert f"steps smaller than {power['detectable_pct']:.1f} %" in text
    assert f"a 5 % step needs {power['step_repetitions_per_value']} repetition(s)" in text
    cv = power["noise_cv"]
    assert _rank_test_power(power["detectable_pct"] / 100, cv, 45, 45,
                            power["alpha"]) == pytest.approx(0.8, abs=0.025)
    # The change point's: the step its stretches (16 and 14 values, 48 and 42
    # repetitions) would need, at the level of a window of both.
    assert 4 < cp["detectable_pct"] < abs(cp["change_pct"])
    assert _rank_test_power(cp["detectable_pct"] / 100, cv, 48, 42,
                            0.0005 / 27) == pytest.approx(0.8, abs=0.025)


def _rank_test_power(change: float, cv: float, n_a: int, n_b: int, alpha: float) -> float:
    """How often the rank test (scipy's, as analysis/ranks.py computes it beyond 400
    cells: normal with continuity correction) gives p < alpha for normal noise."""
    from scipy import stats

    rng = np.random.default_rng(5)
    a = rng.normal(1.0, cv, (4000, n_a))
    b = rng.normal(1.0 + change, cv, (4000, n_b))
    p = stats.mannwhitneyu(a, b, axis=1, method="asymptotic").pvalue
    return float(np.mean(p < alpha))


def test_text_names_the_values_and_the_power(db: str, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    assert main(["trend", "goodput", "--db", db, "--filter", "test=bulk"]) == 0
    out = capsys.readouterr().out
    assert "30 values, 90 runs, natural order" in out
    line = next(x for x in out.splitlines() if "v1.15 -> v1.16" in x)
    assert "Mbit/s" in line and " -1" in line
    assert "steps smaller than" in out and "a 5 % step needs" in out


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_drawn_to_a_file(db: str, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"trend{suffix}"
    proc = _hoplab("trend", "goodput", "--db", db, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" if suffix == ".png" else (
        b"<svg" in data[:2000] if suffix == ".svg" else data[:5] == b"%PDF-")
    if suffix == ".svg":
        assert "-2" in data.decode() and "change point" in data.decode()


def test_drawn_as_an_interactive_page(db: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trend.html"
    assert main(["trend", "goodput", "--db", db, "--filter", "test=bulk", "--json",
                 "-o", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    text = out.read_text(encoding="utf-8")
    assert not list(tmp_path.glob("*.tmp*"))
    # Self-contained: plotly.js inlined, nothing fetched.
    assert "Plotly.newPlot" in text and "<script src" not in text
    fig = json.loads(re.search(r'hoplabDraw\("trend", (\{.*?\})\);</script>',
                               text).group(1))  # type: ignore[union-attr]
    go = pytest.importorskip("plotly.graph_objects")
    go.Figure(fig)                                       # a figure plotly accepts
    reps, medians = fig["data"]
    # Every repetition a point, in Mbit/s, at its version; each median on the line.
    runs = [(p["value"], r["value"]) for p in doc["points"] for r in p["runs"]]
    assert reps["mode"] == "markers" and len(reps["y"]) == 90
    drawn, stored = sorted(zip(reps["x"], reps["y"], strict=True)), sorted(runs)
    assert [x for x, _ in drawn] == [v for v, _ in stored]
    assert [y for _, y in drawn] == pytest.approx([x / 1e6 for _, x in stored])
    assert medians["x"] == VERSIONS
    assert medians["y"] == pytest.approx([p["median"] / 1e6 for p in doc["points"]])
    # The change point, between v1.15 and v1.16, marked with its change.
    (cp,) = doc["change_points"]
    (shape,) = fig["layout"]["shapes"]
    assert shape["x0"] == shape["x1"] == STEP_AT - 0.5
    (note,) = fig["layout"]["annotations"]
    assert note["text"] == f"{cp['change_pct']:+.1f} %"
    assert "v1.15 → v1.16" in text and "steps smaller than" in text


def test_mixing_tests_is_warned_about(db: str) -> None:
    proc = _hoplab("trend", "goodput", "--db", db)
    assert proc.returncode == 0
    assert "the runs are of 2 tests (wan/bulk, wan/other); add --filter test=" in proc.stderr
    proc = _hoplab("trend", "goodput", "--db", db, "--filter", "test=bulk")
    assert proc.stderr == ""


def test_a_bad_file_suffix_is_refused_before_reading(db: str, tmp_path: Path) -> None:
    proc = _hoplab("trend", "goodput", "--db", db, "-o", str(tmp_path / "t.jpg"))
    assert proc.returncode == 2
    assert "must end in .png, .svg, .pdf" in proc.stderr
    assert not (tmp_path / "t.jpg").exists()


def test_time_order(tmp_path: Path) -> None:
    path = str(tmp_path / "t.db")
    # Measured newest version first: time order is the reverse of natural order.
    _fill(path, VERSIONS, times=[2_000_000_000.0 - 10 * i for i in range(30)])
    proc = _hoplab("trend", "goodput", "--db", path, "--order", "time", "--json",
                   "--filter", "test=bulk")
    doc = json.loads(proc.stdout)
    assert [p["value"] for p in doc["points"]] == VERSIONS[::-1]
    (cp,) = doc["change_points"]
    assert (cp["before"], cp["after"]) == ("v1.16", "v1.15")
    assert cp["change_pct"] == pytest.approx(25, abs=3.5)


def _repo(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

    def git(*argv: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True,
                              check=True, env=env).stdout.strip()

    git("init", "-q")
    shas = []
    for i in range(30):
        (repo / "f").write_text(str(i))
        git("add", "f")
        git("commit", "-q", "-m", f"c{i}")
        shas.append(git("rev-parse", "HEAD"))
    git("tag", "release", shas[3])
    return repo, shas


def test_git_order_follows_first_parents(tmp_path: Path) -> None:
    repo, shas = _repo(tmp_path)
    # Values are short SHAs, except one tag; natural order would scramble them.
    values = [s[:12] for s in shas]
    values[3] = "release"
    path = str(tmp_path / "g.db")
    _fill(path, values, label="commit")
    proc = _hoplab("trend", "goodput", "--by", "commit", "--order", f"git:{repo}",
                   "--db", path, "--json", "--filter", "test=bulk")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [p["value"] for p in doc["points"]] == values
    (cp,) = doc["change_points"]
    assert (cp["before"], cp["after"]) == (values[15], values[16])


def test_git_order_refuses_a_value_that_is_no_commit(tmp_path: Path) -> None:
    repo, shas = _repo(tmp_path)
    path = str(tmp_path / "g.db")
    _fill(path, [s[:12] for s in shas[:5]] + ["deadbeef"], label="commit")
    proc = _hoplab("trend", "goodput", "--by", "commit", "--order", f"git:{repo}",
                   "--db", path)
    assert proc.returncode == 2
    assert "1 value(s) name no commit on HEAD's first-parent line: deadbeef" in proc.stderr


def test_nothing_to_show_and_bad_order_are_usage_errors(db: str) -> None:
    proc = _hoplab("trend", "goodput", "--db", db, "--by", "firmware")
    assert proc.returncode == 2 and "has both goodput and firmware" in proc.stderr
    proc = _hoplab("trend", "goodput", "--db", db, "--order", "random")
    assert proc.returncode == 2 and "natural, time or git:REPO" in proc.stderr


def test_by_start_time_shows_times(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trend", "goodput", "--by", "started_at", "--db", db,
                 "--filter", "test=bulk"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if " -> " in x)
    assert re.match(r"^  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d -> \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ",
                    line), line


def _gro(path: str, versions: list[str]) -> None:
    """Each version with gro=on and gro=off, 3 runs each; gro=off 5 % lower throughout,
    and gro=on alone 20 % lower from the fourth version on."""
    rng = np.random.default_rng(4)
    with open_store(path) as store:
        for i, version in enumerate(versions):
            for gro in ("on", "off"):
                level = 100e6 * (0.95 if gro == "off" else 1.0) * \
                    (0.8 if gro == "on" and i >= 3 else 1.0)
                for rep in range(1, 4):
                    store.save_run(make_run(rep=rep, labels={"version": version},
                                            variant={"gro": gro},
                                            goodput=float(rng.normal(level, level * 0.01))))


def test_two_values_cannot_tell_and_say_why(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 19: "no change point" and "power": null on 2 values, where compare of the
    # same runs says worse.
    path = str(tmp_path / "g.db")
    _gro(path, ["v1"])
    assert main(["trend", "goodput", "--by", "gro", "--db", path]) == 0
    out = capsys.readouterr().out
    assert "2 values, 6 runs" in out and "no change point" not in out
    assert ("not enough data: a step needs at least 2 values on each side, and there are 2 "
            "values; `hoplab compare gro=off gro=on` compares two values") in out
    assert main(["trend", "goodput", "--by", "gro", "--db", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["power"] is None and doc["change_points"] == []
    assert doc["reason"] == ("a step needs at least 2 values on each side, and there are 2 "
                             "values")
    # The interactive page and the dashboard's trend page say it too.
    page = tmp_path / "t.html"
    assert main(["trend", "goodput", "--by", "gro", "--db", path, "-o", str(page)]) == 0
    assert "not enough data: a step needs at least 2 values on each side" in \
        page.read_text(encoding="utf-8")
    with open_store(path) as store:
        body = Dashboard(store).handle("/trend?metric=goodput&by=gro").body.decode()
    assert "not enough data: a step needs at least 2 values on each side" in body
    assert "no change point" not in body


def test_runs_that_differ_in_another_variant_key_are_separate_series(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "g.db")
    versions = [f"v{i}" for i in range(1, 9)]
    _gro(path, versions)
    assert main(["trend", "goodput", "--db", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"metric", "series"}
    off, on = doc["series"]
    assert (off["variant"], on["variant"]) == ({"gro": "off"}, {"gro": "on"})
    with open_store(path) as store:
        ids = {gro: {r.id for r in store.list_runs({"gro": gro})} for gro in ("on", "off")}
    for series, gro in ((off, "off"), (on, "on")):
        assert [p["value"] for p in series["points"]] == versions
        assert {r["id"] for p in series["points"] for r in p["runs"]} == ids[gro]
    assert off["change_points"] == []
    assert [(c["before"], c["after"]) for c in on["change_points"]] == [("v3", "v4")]
    assert on["change_points"][0]["change_pct"] == pytest.approx(-20, abs=1)

    assert main(["trend", "goodput", "--db", path]) == 0
    out = capsys.readouterr().out
    assert "2 series, 48 runs, natural order; the runs differ in gro too" in out
    assert "gro=off: goodput by version: 8 values, 24 runs" in out
    assert "gro=on: goodput by version: 8 values, 24 runs" in out
    # One drawing is one series: say which to pick.
    assert main(["trend", "goodput", "--db", path, "-o", str(tmp_path / "t.png")]) == 2
    assert "the runs are 2 series (gro=off, gro=on); draw one: add --filter gro=off" in \
        capsys.readouterr().err
    assert not (tmp_path / "t.png").exists()
    assert main(["trend", "goodput", "--db", path, "--filter", "gro=on", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["variant"] == {} and len(one["change_points"]) == 1


def test_the_png_title_says_not_enough_data_as_the_cli_does(tmp_path: Path) -> None:
    from hoplab.analysis.series_trend import trend_points
    from hoplab.analysis.trend import analyse
    from hoplab.render.plots_trend import trend_figure

    path = str(tmp_path / "g.db")
    _gro(path, ["v1"])
    with open_store(path) as store:
        points = trend_points(store, "goodput", {}, "gro")
    fig = trend_figure(analyse("goodput", "gro", points))
    assert fig.axes[0].get_title() == "goodput by gro: not enough data"


def test_the_dashboards_trend_chart_reads_gbits_and_variant_values_as_given() -> None:
    from hoplab.web.pages import _points_table, trend_chart

    points: list[tuple[str | float, float, int]] = [(1.0, 25e9, 3), (2.0, 24e9, 3),
                                                    (4.0, 12.5e9, 3)]
    fig = trend_chart(points, "goodput", "hops").figure
    (trace,) = fig["data"]
    assert trace["x"] == ["1", "2", "4"] and fig["layout"]["xaxis"]["type"] == "category"
    assert trace["y"] == [25.0, 24.0, 12.5]
    assert fig["layout"]["yaxis"]["title"]["text"] == "goodput (Gbit/s)"
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", str(_points_table(points, "goodput", "hops")))
    assert cells[0::3] == ["1", "2", "4"]
