"""A figure that does not vary between repetitions (issue 18): every repetition of a value
equal, as iperf3's retransmits of imported runs often are. It has power figures too (any
change is visible), and `trend`, `report` and the dashboard's trend answer instead of
dividing by its zero noise."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hoplab.analysis.power import (
    achieved_power,
    detectable_change,
    noise_cv,
    power_figures,
    repetitions_needed,
)
from hoplab.analysis.ranks import rank_p
from hoplab.cli.main import main
from hoplab.store import open_store
from hoplab.web.app import Dashboard

IPERF3 = Path(__file__).resolve().parents[1] / "data" / "iperf3" / "tcp_upload.json"
VERSIONS = 6


def test_no_noise_is_zero_and_a_spread_around_zero_has_no_size() -> None:
    assert noise_cv([[53.0, 53.0, 53.0], [60.0, 60.0]]) == 0.0
    assert noise_cv([[0.0, 0.0, 0.0], [0.0, 0.0]]) == 0.0          # all zero: no warning
    assert math.isnan(noise_cv([[0.0, 2.0, 0.0]]))                  # relative to 0: no size
    assert noise_cv([[0.0, 2.0, 0.0], [100.0, 110.0]]) == pytest.approx(
        noise_cv([[100.0, 110.0]]))


def test_any_change_is_visible_where_the_sizes_reach_the_level() -> None:
    # Without noise a change makes two blocks of ties; the rank test gives those its p:
    # 5 vs 5 at 0.0079 (the smallest p of 5 + 5), below 0.01; 4 vs 4 cannot go below 0.029.
    assert rank_p([53.0] * 5, [54.0] * 5) == pytest.approx(2 / 252)
    assert achieved_power(0.01, 0.0, 5, 5, 0.01) == 1.0
    assert achieved_power(0.01, 0.0, 4, 4, 0.01) == 0.0
    assert detectable_change(0.0, 5, 5, alpha=0.01) == 0.0
    assert math.isinf(detectable_change(0.0, 4, 4, alpha=0.01))
    assert repetitions_needed(0.05, 0.0, alpha=0.01) == 5
    figures = power_figures(0.0, 5, 5, change=0.05, alpha=0.01)
    assert figures.describe().startswith("no noise (every repetition equal): 5 vs 5 "
                                         "repetitions detect any change")
    assert figures.to_json()["detectable_pct"] == 0.0


def _iperf3(path: Path, scale: float) -> None:
    """tcp_upload.json with every rate and byte count scaled (goodput varies between
    repetitions) and its retransmits as they are (they do not)."""
    def scaled(x: Any, key: str = "") -> Any:
        if isinstance(x, dict):
            return {k: scaled(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [scaled(v) for v in x]
        if key in ("bits_per_second", "bytes") and isinstance(x, int | float):
            return type(x)(x * scale)
        return x
    path.write_text(json.dumps(scaled(json.loads(IPERF3.read_text()))))


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    for v in range(1, VERSIONS + 1):
        files = []
        for rep in range(3):
            f = tmp_path / f"bulk-v{v}-{rep}.json"
            _iperf3(f, 1 + (rep - 1) / 100)
            files.append(str(f))
        assert main(["import", *files, "--test", "bulk", "--label", f"version=v{v}",
                     "--db", path]) == 0
    return path


def test_trend_report_and_dashboard_of_retransmits_that_never_vary(
        db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    with open_store(db) as store:
        values: dict[str, list[float | None]] = {r.labels["version"]: []
                                                 for r in store.list_runs()}
        for r in store.list_runs():
            values[r.labels["version"]].append(store.get_run(r.id).metric("retransmits"))
    assert all(v == [53.0] * 3 for v in values.values())

    assert main(["trend", "retransmits", "--db", db, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["change_points"] == []
    power = doc["power"]
    # 6 values: stretches of 3 values, 9 repetitions a side; the detector's level is
    # 0.0005 over the 3 splits of a window of 6. Two blocks of 9 ties give p = 4.7e-5.
    assert (power["noise_cv"], power["detectable_pct"]) == (0.0, 0.0)
    assert power["alpha"] == pytest.approx(0.0005 / 3)
    assert rank_p([0.0] * 9, [1.0] * 9) < power["alpha"] < rank_p([0.0] * 6, [1.0] * 6)
    assert power["step_repetitions_per_value"] == 3

    assert main(["trend", "retransmits", "--db", db]) == 0
    text = capsys.readouterr().out
    assert "no noise" in text and "any step" in text and "steps smaller than" not in text

    out = tmp_path / "r.html"
    assert main(["report", "test=bulk", "-o", str(out), "--db", db]) == 0
    page = out.read_text(encoding="utf-8")
    assert "Change points by version" in page and "retransmits" in page

    with open_store(db) as store:
        resp = Dashboard(store).handle("/api/trend?metric=retransmits&by=version")
        assert resp.status == 200, resp.body
        assert json.loads(resp.body)["change_points"] == []
        assert Dashboard(store).handle("/trend?metric=retransmits&by=version").status == 200
