"""Legends quote the figures `hoplab show` prints, for the phase they belong to: known
answers from real stored runs (tests/data/render_runs: a 3 s TCP upload through the
100 Mbit/s chain, an rrul run with 2 s idle, 6 s load, 2 s idle, a 3 s ping run).

Before, the total's legend was the mean of the drawn series (the tail after the
flows counted at 0), an rrul run's RTT was quoted over idle and load together, and
the CDF mixed the idle samples with the loaded ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from hoplab.cli.main import main
from hoplab.record import RunRecord
from hoplab.render import charts
from hoplab.render.plots import figure
from hoplab.store import open_store
from tests.helpers.runs import real_run, real_store

TCP, RRUL, PING = 1, 2, 3


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("legends") / "runs.db"
    assert real_store(path, "tcp", "rrul", "ping") == [TCP, RRUL, PING]
    return str(path)


def stored(db: str, run_id: int) -> RunRecord:
    with open_store(db) as store:
        return store.get_run(run_id)


def legend(fig: Figure, axis: int = 0) -> list[str]:
    found = fig.axes[axis].get_legend()
    assert found is not None
    return [t.get_text() for t in found.get_texts()]


def show(db: str, run_id: int, capsys: pytest.CaptureFixture[str]) -> str:
    """What `hoplab show` printed, every run of spaces one space."""
    assert main(["show", str(run_id), "--db", db]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_tcp_total_quotes_the_mean_rate_and_goodput_show_prints(
        db: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = stored(db, TCP)
    texts = legend(figure("timeseries", [run]))
    assert texts == ["tcp-up: goodput 95.7 Mbit/s",
                     "total: mean rate 86.4 Mbit/s, goodput 95.7 Mbit/s"]
    out = show(db, TCP, capsys)
    assert "│ mean rate │ 86.4 Mbit/s │" in out and "│ goodput │ 95.7 Mbit/s │" in out
    # What the legend said before: the mean of the drawn total, its tail at 0 included.
    total = next(s for s in run.series if s.name == "throughput" and s.flow is None)
    assert np.mean(total.v) / 1e6 == pytest.approx(84.9, abs=0.05)


def test_rrul_throughput_is_quoted_for_the_load_and_rtt_per_phase(
        db: str, capsys: pytest.CaptureFixture[str]) -> None:
    fig = figure("timeseries", [stored(db, RRUL)])
    tput = legend(fig, 0)
    assert tput[-3:] == [
        "total: mean rate 165 Mbit/s (load phase), goodput 167 Mbit/s",
        "total up: mean rate 76.5 Mbit/s (load phase), goodput 78.4 Mbit/s",
        "total down: mean rate 88.2 Mbit/s (load phase), goodput 91.9 Mbit/s"]
    rtt = legend(fig, 1)
    # The flows' own medians pool idle and load: not quoted; the phases' figures are.
    assert rtt == ["under-load.ping", "under-load.probe",
                   "idle RTT 0.205 ms (median, ping and probe)",
                   "loaded RTT 34.5 ms (median, ping and probe)"]
    levels = [c for c in fig.axes[1].collections if isinstance(c, LineCollection)]
    drawn = sorted((round(float(seg[0][1]), 6), float(seg[0][0]), float(seg[1][0]))
                   for c in levels for seg in c.get_segments())
    assert drawn == [(0.205223, 0.0, 2.0), (0.205223, 8.0, 10.0), (34.523273, 2.0, 8.0)]
    out = show(db, RRUL, capsys)
    for row in ("│ idle RTT │ 0.205 ms │", "│ loaded RTT │ 34.5 ms │",
                "│ goodput up │ 78.4 Mbit/s │", "│ mean rate down │ 88.2 Mbit/s │"):
        assert row in out


def test_rrul_cdf_is_one_curve_per_phase_at_its_stored_median(db: str) -> None:
    run = stored(db, RRUL)
    fig = figure("cdf", [run])
    assert legend(fig) == ["#2 under-load rep 1 idle: idle RTT 0.205 ms, n=213",
                           "#2 under-load rep 1 load: loaded RTT 34.5 ms, n=321"]
    for line, stored_median in zip(fig.axes[0].get_lines(), (0.205223, 34.523273),
                                   strict=True):
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        # Odd counts: the median is the sample where the curve first reaches one half.
        assert x[np.argmax(y >= 0.5)] == pytest.approx(stored_median)
    # The report's and the dashboard's CDF split the same way.
    cdf = charts.latency_cdf([run])
    assert cdf is not None
    assert [d["name"] for d in cdf.figure["data"]] == [
        "idle: idle RTT 0.205 ms, n=213", "load: loaded RTT 34.5 ms, n=321"]


def test_single_phase_run_quotes_its_stored_median(db: str) -> None:
    run = stored(db, PING)
    assert legend(figure("ping", [run])) == ["ping (to server): median 0.064 ms, n=15"]
    assert legend(figure("cdf", [run])) == ["#3 ping rep 1: median 0.064 ms, n=15"]
    assert legend(figure("timeseries", [run])) == ["ping: median 0.064 ms"]


def test_report_charts_quote_the_same_figures(db: str) -> None:
    with open_store(db) as store:
        rrul = store.get_run(RRUL)
    timeline = charts.timeline(rrul)
    assert timeline is not None
    names = [t["name"] for t in timeline.figure["data"]]
    assert "total up: mean rate 76.5 Mbit/s (load phase), goodput 78.4 Mbit/s" in names
    assert "loaded RTT 34.5 ms (median, ping and probe)" in names
    level = next(t for t in timeline.figure["data"] if t["name"].startswith("idle RTT"))
    assert level["x"] == [0.0, 2.0, None, 8.0, 10.0]
    assert level["y"] == [0.205223, 0.205223, None, 0.205223, 0.205223]


def test_real_runs_load_as_exported() -> None:
    # The data files are what `hoplab export` wrote (trimmed of sampler series).
    run = real_run("rrul")
    assert run.kind == "rrul" and run.metric("latency_load") == pytest.approx(34.523273)
    assert Path(__file__).resolve().parents[1].joinpath("data", "render_runs").is_dir()
