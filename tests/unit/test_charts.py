"""The plotly figures of a run: valid plotly JSON, Flent's layout, phases, stacked CPU."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go

from hoplab.record import RunRecord, Series
from hoplab.render import charts

PHASES = [{"name": "idle", "start_s": 0.0, "end_s": 5.0},
          {"name": "load", "start_s": 5.0, "end_s": 25.0},
          {"name": "idle-after", "start_s": 25.0, "end_s": 30.0}]


def run(series: list[Series], phases: list[dict[str, object]] | None = None) -> RunRecord:
    return RunRecord(experiment="e", test="rrul", kind="rrul", repetition=1, variant={},
                     labels={}, started_at=0.0, id=7, series=series,
                     metadata={"test": {"phases": phases or PHASES, "flows": [
                         {"name": "p", "kind": "ping"}, {"name": "q", "kind": "probe"}]}})


def tput(flow: str | None, key: str | None = None) -> Series:
    t = np.arange(5.2, 25.01, 0.2)
    return Series("throughput", "bit/s", t.tolist(), [80e6] * len(t), flow=flow, key=key)


def rtt(flow: str, n: int) -> Series:
    t = np.linspace(0, 30, n)
    return Series("rtt", "ms", t.tolist(), (1 + t % 3).tolist(), flow=flow)


def test_timeline_has_throughput_above_latency_and_phase_marks() -> None:
    c = charts.timeline(run([tput("f.1"), tput("f.2"), tput(None), tput(None, "up"),
                             rtt("p", 150), rtt("q", 1500)]))
    assert c is not None
    go.Figure(c.figure)                      # plotly's own validation of every property
    layout = c.figure["layout"]
    assert layout["yaxis"]["domain"][0] > layout["yaxis2"]["domain"][1]
    assert layout["yaxis"]["title"]["text"] == "throughput (Mbit/s)"
    names = [t["name"] for t in c.figure["data"]]
    assert names == ["f.1", "f.2", "total", "total up", "p RTT", "q RTT"]
    assert c.figure["data"][0]["y"][0] == 80.0
    assert all(t["yaxis"] == "y2" for t in c.figure["data"][4:])
    lines = [s["x0"] for s in layout["shapes"] if s["type"] == "line"]
    assert lines == [5.0, 25.0]
    assert [a["text"] for a in layout["annotations"]] == ["idle", "load", "idle-after"]
    assert c.notes == []


def test_timeline_thins_long_series_and_says_so() -> None:
    c = charts.timeline(run([rtt("q", 50_000)]), budget=1000)
    assert c is not None
    trace = c.figure["data"][0]
    assert len(trace["x"]) <= 1000
    assert "of 50,000 pts" in trace["name"]
    assert c.notes and "50,000 samples" in c.notes[0]
    assert max(trace["y"]) == 1 + max(np.linspace(0, 30, 50_000) % 3).round(5)


def test_one_phase_draws_no_marks_and_no_series_no_chart() -> None:
    c = charts.timeline(run([tput(None)], [{"name": "load", "start_s": 0, "end_s": 10}]))
    assert c is not None and c.figure["layout"]["shapes"] == []
    assert charts.run_charts(run([])) == []


def test_cpu_is_stacked_per_core_without_the_all_row() -> None:
    t = [0.1, 0.2, 0.3]
    series = [Series(f"cpu.{s}", "%", t, [10.0, 20.0, 30.0], node="host", key=k)
              for k in ("cpu1", "cpu0", "all", "cpu10")
              for s in ("user", "system", "irq", "softirq", "idle")]
    c = charts.cpu(run(series))
    assert c is not None
    go.Figure(c.figure)
    data = c.figure["data"]
    assert {d["name"] for d in data} == {"user", "system", "irq", "softirq"}
    assert [d["stackgroup"] for d in data[::4]] == ["core0", "core1", "core2"]
    titles = [a["text"] for a in c.figure["layout"]["annotations"]]
    assert titles == ["cpu0", "cpu1", "cpu10"]
    assert sum(d["showlegend"] for d in data) == 4


def test_cdf_one_curve_per_run_and_flow() -> None:
    a, b = run([rtt("p", 100), rtt("q", 10)]), run([rtt("p", 50)])
    b.id = 8
    c = charts.latency_cdf([a, b])
    assert c is not None
    go.Figure(c.figure)
    # Phased runs without a stored figure per phase: each flow over every phase, said so.
    assert [d["name"] for d in c.figure["data"]] == [
        "run 7 p: all phases, n=100", "run 7 q: all phases, n=10", "run 8 p: all phases, n=50"]
    assert c.figure["data"][0]["y"][-1] == 1.0


def test_figure_json_cannot_end_a_script_and_has_no_nan() -> None:
    text = charts.figure_json({"data": [{"name": "</script><b>"}], "layout": {}})
    assert "</script>" not in text and "<b>" not in text
    assert json.loads(text)["data"][0]["name"] == "</script><b>"
    assert charts.rounded(np.array([1.23456789, float("nan")])) == [1.23457, None]
    assert charts.rounded(np.array([2151.989850848333])) == [2151.99]


def test_the_legend_hangs_below_the_time_axis_title() -> None:
    # Issue 27: a horizontal legend at y = -0.12, anchored by its bottom, grew upwards
    # over "time (s)". Now its top is below the title (about 45 px under the plot).
    c = charts.timeline(run([tput("f.1"), rtt("p", 150)]))
    assert c is not None
    go.Figure(c.figure)
    layout = c.figure["layout"]
    legend, margin = layout["legend"], layout["margin"]
    plot_px = layout["height"] - margin["t"] - margin["b"]
    assert legend["yanchor"] == "top" and -legend["y"] * plot_px >= 50
    assert margin["b"] >= -legend["y"] * plot_px + 40       # room for a row of entries
