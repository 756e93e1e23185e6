"""One helper for each job the review found copied: making data JSON-safe (NaN and
infinity as null) and choosing a rate unit for an axis."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hoplab import jsonsafe
from hoplab.cli.main import main
from hoplab.importers import flent, iperf3
from hoplab.record import Metric, RunRecord
from hoplab.render import charts, plot_parts, plots_time, units
from hoplab.store import open_store
from hoplab.web.app import Dashboard


def _strict(text: str | bytes) -> Any:
    """json.loads that refuses NaN and Infinity, as every JSON parser but Python's does."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    with open_store(path) as store:
        store.save_run(RunRecord(
            experiment="e", test="ping", kind="ping", repetition=1, variant={}, labels={},
            started_at=1.7e9, metrics=[Metric("rtt_median", math.nan, "ms"),
                                       Metric("rtt_max", math.inf, "ms"),
                                       Metric("loss", 100.0, "%")]))
    return path


def test_cli_json_has_null_for_nan_and_inf(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--db", db, "--json"]) == 0
    (run,) = _strict(capsys.readouterr().out)
    assert run["metrics"] == {"rtt_median": None, "rtt_max": None, "loss": 100.0}
    assert main(["show", "1", "--db", db, "--json"]) == 0
    shown = _strict(capsys.readouterr().out)
    assert [m["value"] for m in shown["metrics"]] == [None, None, 100.0]


def test_dashboard_json_has_null_for_nan_and_inf(db: str) -> None:
    with open_store(db) as store:
        dash = Dashboard(store)
        for target in ("/api/runs", "/api/run/1"):
            resp = dash.handle(target)
            assert resp.status == 200, (target, resp.body)
            assert "null" in resp.body.decode()
            _strict(resp.body)


def test_one_json_safe_and_one_rate_scale() -> None:
    # The importers' metadata is made JSON-safe by the one helper, not a copy.
    assert all(vars(m)["json_safe"] is jsonsafe.json_safe for m in (flent, iperf3))
    assert jsonsafe.json_safe({1: [math.nan, (math.inf, 2.0)], "x": -math.inf}) == {
        "1": [None, [None, 2.0]], "x": None}
    # The modules that draw rates use units' rate_scale, not a copy (read from each
    # module's namespace: they import it, they do not export it).
    assert all(vars(m)["rate_scale"] is units.rate_scale for m in (charts, plot_parts, plots_time))
    assert units.rate_scale(94.1e6) == (1e6, "Mbit/s")
    assert units.rate_scale(-2e9) == (1e9, "Gbit/s")
    assert units.rate_scale(999.0) == (1.0, "bit/s")


def test_run_json_has_null_for_a_figure_that_could_not_be_computed() -> None:
    from types import SimpleNamespace

    from hoplab.cli.run import run_json

    rec = RunRecord(experiment="e", test="mix", kind="custom", repetition=1, variant={},
                    labels={}, started_at=1.7e9, id=1,
                    metrics=[Metric("jain_index", math.nan, "index"),
                             Metric("goodput", 0.0, "bit/s")])
    exp = SimpleNamespace(name="e", seed=1)
    data = run_json(exp, "1", [rec], "store", False)  # type: ignore[arg-type]
    assert _strict(json.dumps(data))["runs"][0]["metrics"] == {"jain_index": None,
                                                                "goodput": 0.0}
