"""`hoplab report`: one self-contained file with the data points, metadata and verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from hoplab.cli.main import main
from hoplab.record import Metric, RunRecord, Series
from hoplab.store import open_store

HOST = "lab-host-7"
LABEL = "<b>fw</b>"


def run(qos: str, rep: int, rtt_points: int = 300) -> RunRecord:
    t = np.linspace(0, 30, rtt_points)
    load = 40.0 if qos == "off" else 4.0
    v = np.where((t > 5) & (t < 25), load, 1.0) + 0.001 * rep
    v[rtt_points // 3] = 777.125                         # a spike every chart must keep
    tt = np.arange(0.2, 30.01, 0.2)
    return RunRecord(
        experiment="qos", test="rrul", kind="rrul", repetition=rep, variant={"qos": qos},
        labels={"firmware": LABEL}, started_at=1.7e9 + rep, duration_s=30.0,
        metadata={"host": HOST, "test": {"phases": [
            {"name": "idle", "start_s": 0.0, "end_s": 5.0},
            {"name": "load", "start_s": 5.0, "end_s": 25.0},
            {"name": "idle-after", "start_s": 25.0, "end_s": 30.0}]}},
        metrics=[Metric("latency_load", load * (1 + 0.01 * rep), "ms"),
                 Metric("goodput", 95e6 + rep, "bit/s")],
        series=[Series("rtt", "ms", t.tolist(), v.tolist(), flow="rrul.ping"),
                Series("throughput", "bit/s", tt.tolist(), [93.5e6] * len(tt))])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    with open_store(str(path)) as store:
        for rep in range(1, 5):
            store.save_run(run("off", rep))
            store.save_run(run("on", rep))
        store.save_run(run("on", 9, rtt_points=200_000))
    return path


def report(db: Path, out: Path, *runs: str) -> str:
    assert main(["report", *runs, "-o", str(out), "--db", str(db)]) == 0
    return out.read_text(encoding="utf-8")


def figures(text: str) -> list[dict[str, object]]:
    return [json.loads(m) for m in re.findall(r'hoplabDraw\("[^"]+", (\{.*?\})\);</script>',
                                              text)]


def test_one_run_is_one_offline_file_with_points_and_metadata(db: Path, tmp_path: Path,
                                                              ) -> None:
    out = tmp_path / "r.html"
    text = report(db, out, "1")
    assert list(tmp_path.glob("r.html*")) == [out]      # no temp file or asset left beside
    assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)\s*=", text, re.I)
    assert "Plotly.newPlot" in text and "plotly.js" in text.lower()
    figs = figures(text)
    assert len(figs) == 2                   # throughput and latency; CDF (no CPU series)
    timeline = figs[0]
    data = timeline["data"]
    assert isinstance(data, list)
    # Legends quote the stored figures: goodput (no mean rate stored), the loaded RTT.
    assert [t["name"] for t in data] == ["total: goodput 95 Mbit/s", "rrul.ping RTT",
                                         "loaded RTT 40.4 ms (median, ping and probe)"]
    assert data[0]["y"][:2] == [93.5, 93.5]
    assert 777.125 in data[1]["y"]
    assert HOST in text
    assert "&lt;b&gt;fw&lt;/b&gt;" in text and LABEL not in text
    assert "idle-after" in text             # phases are marked and listed


def test_several_runs_get_a_comparison_with_verdicts(db: Path, tmp_path: Path) -> None:
    text = report(db, tmp_path / "r.html", "1-8")
    assert "B = qos=on against A = qos=off" in text
    verdicts = dict(re.findall(r"<td class=\"\">([^<]+)</td>(?:<td[^>]*>[^<]*</td>){7}"
                               r"<td[^>]*><span class=\"verdict \w+\">([^<]+)</span>", text))
    assert verdicts == {"loaded RTT": "better", "goodput": "same"}
    assert len(re.findall(r'<h2 id="run-\d+">', text)) == 8


def test_selection_and_million_scale_series_are_thinned(db: Path, tmp_path: Path) -> None:
    text = report(db, tmp_path / "r.html", "qos=on,firmware=" + LABEL, "1")
    assert len(re.findall(r'<h2 id="run-\d+">', text)) == 6
    big = [t for f in figures(text) for t in f["data"]  # type: ignore[attr-defined]
           if "of 200,000 pts" in t["name"]]
    assert big and all(len(t["x"]) <= 4000 for t in big)
    assert all(777.125 in t["y"] for t in big)
    assert "thinned for drawing" in text


def test_unknown_run_is_a_usage_error(db: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "99", "-o", str(tmp_path / "x.html"), "--db", str(db)]) == 2
    assert "no run 99" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
