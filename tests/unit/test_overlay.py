"""Overlays (issue 21): `hoplab plot SELECTION... --overlay` and the dashboard's
/overlay draw several groups of runs on shared axes, captioned by what sets each group
apart, each line the stored series it stands for."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from hoplab.cli.main import main
from hoplab.errors import UsageError
from hoplab.record import RunRecord
from hoplab.render.overlay import groups_of
from hoplab.render.plots_overlay import overlay
from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.web import rrul_run, sample_runs

OFF, ON = "qos=off,experiment=lab-a", "qos=on"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("overlay") / "runs.db"
    with open_store(str(path)) as store:
        for _, run in sample_runs():
            store.save_run(run)
    return path


def _runs(qos: str, firmware: str = "v1") -> list[RunRecord]:
    runs = [rrul_run(qos, rep, firmware) for rep in (1, 2)]
    for i, r in enumerate(runs):
        r.id = (10 if qos == "on" else 20) + i + (firmware == "v2") * 100
    return runs


def test_groups_are_captioned_by_what_sets_them_apart() -> None:
    title, groups = groups_of([("a", _runs("off")), ("b", _runs("on"))])
    assert title == "experiment=lab-a test=rrul device=ap1 firmware=v1"
    assert [g.caption for g in groups] == ["qos=off (2 runs)", "qos=on (2 runs)"]
    _, groups = groups_of([("a", _runs("on")), ("b", _runs("on", "v2")[:1])])
    assert [g.caption for g in groups] == ["firmware=v1 (2 runs)", "firmware=v2 (run 110)"]
    with pytest.raises(UsageError, match="run 10 is in both 'a' and 'b'"):
        groups_of([("a", _runs("on")), ("b", _runs("on"))])
    with pytest.raises(UsageError, match="9 selections: an overlay draws at most 8"):
        groups_of([(str(i), _runs("on")) for i in range(9)])


def test_runs_of_two_tests_are_overlaid_a_test_at_a_time() -> None:
    # Issue 27: `plot hops=1 hops=4 --overlay` drew tcp-up and rrul runs as one line.
    off, on = _runs("off"), _runs("on")
    off[1].test = on[1].test = "tcp-up"
    title, groups = groups_of([("hops=1", off), ("hops=4", on)])
    assert title == "experiment=lab-a device=ap1 firmware=v1"
    assert [(g.caption, g.selection, [r.id for r in g.runs]) for g in groups] == [
        ("qos=off test=rrul (run 20)", "hops=1,test=rrul", [20]),
        ("qos=off test=tcp-up (run 21)", "hops=1,test=tcp-up", [21]),
        ("qos=on test=rrul (run 10)", "hops=4,test=rrul", [10]),
        ("qos=on test=tcp-up (run 11)", "hops=4,test=tcp-up", [11])]


def test_each_line_is_the_stored_series_of_its_group() -> None:
    off, on = _runs("off"), _runs("on")
    fig = overlay(*groups_of([("a", off), ("b", on)]))
    top, bottom = fig.axes
    assert top.get_ylabel() == "total throughput (Mbit/s)" and bottom.get_ylabel() == "RTT (ms)"
    lines = top.get_lines()
    assert [line.get_color() for line in lines] == ["#1f77b4"] * 2 + ["#d62728"] * 2
    for line, run in zip(lines, off + on, strict=True):
        total = next(s for s in run.series if s.name == "throughput" and s.flow is None)
        assert np.allclose(line.get_ydata(), np.asarray(total.v) / 1e6)
    legend = top.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == [
        "qos=off (2 runs)", "qos=on (2 runs)"]
    # Latency: each run's ping stream.
    ping = next(s for s in on[1].series if s.name == "rtt" and s.flow == "rrul.ping")
    assert np.allclose(bottom.get_lines()[3].get_ydata(), ping.v)


def test_plot_overlay_writes_the_figure(db: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.svg"
    assert main(["plot", OFF, ON, "--overlay", "-o", str(out), "--db", str(db)]) == 0
    svg = out.read_text()
    assert "qos=off (4 runs)" in svg and "qos=on (4 runs)" in svg
    assert main(["plot", OFF, "1", "--overlay", "-o", str(out), "--db", str(db)]) == 2
    assert "run 1 is in both" in capsys.readouterr().err
    assert main(["plot", OFF, "--kind", "cdf", "--overlay", "--db", str(db)]) == 2
    assert main(["plot", OFF, "--db", str(db)]) == 2
    assert "give --kind" in capsys.readouterr().err


def test_the_dashboard_overlays_and_keeps_the_view_in_its_link(db: Path) -> None:
    with open_store(str(db), read_only=True) as store:
        dash = Dashboard(store)
        compare = dash.handle("/compare?a=qos%3Doff%2Cexperiment%3Dlab-a&b=qos%3Don")
        link = re.search(r'<a id="overlay-link" href="([^"]+)"', compare.body.decode())
        assert link is not None
        page = dash.handle(link.group(1).replace("&amp;", "&")).body.decode()
        figure = json.loads(re.search(r'hoplabDraw\("overlay", (.*)\);</script>',
                                      page).group(1))  # type: ignore[union-attr]
        shown = [t["name"] for t in figure["data"] if t["showlegend"]]
        assert shown == ["qos=off (4 runs)", "qos=on (4 runs)"] * 2   # two panels
        assert len(figure["data"]) == 16
        assert 'id="view-link" href="/overlay?sel=qos%3Doff%2Cexperiment%3Dlab-a&amp;' \
            'sel=qos%3Don"' in page
        bad = dash.handle("/overlay?sel=qos%3Doff&sel=1")
        assert bad.status == 400 and b"run 1 is in both" in bad.body
