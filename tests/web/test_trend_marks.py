"""The dashboard's trend page marks the change points `hoplab trend` finds."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from hoplab.store import open_store
from tests.helpers.runs import make_run
from tests.helpers.web import Served, serving

VERSIONS = [f"v{i}" for i in range(1, 25)]


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("trend") / "runs.db"
    rng = np.random.default_rng(9)
    with open_store(str(path)) as store:
        for i, version in enumerate(VERSIONS):
            level = 200e6 * (1.3 if i >= 12 else 1.0)       # v13 is 30 % faster
            for rep in range(1, 4):
                store.save_run(make_run(rep=rep, labels={"version": version},
                                        goodput=float(rng.normal(level, level * 0.04))))
    with serving(path, {}) as s:
        yield s


def test_api_trend_gives_the_change_points(stepped: Served) -> None:
    with urllib.request.urlopen(f"{stepped.url}/api/trend?metric=goodput&by=version") as r:
        doc = json.load(r)
    assert [p["x"] for p in doc["points"]] == VERSIONS
    (cp,) = doc["change_points"]
    assert (cp["before"], cp["after"]) == ("v12", "v13")
    assert cp["change_pct"] == pytest.approx(30, abs=4)


def test_trend_page_marks_the_step(stepped: Served, page: Any) -> None:
    page.goto(f"{stepped.url}/trend?metric=goodput&by=version")
    page.wait_for_selector(".js-plotly-plot .scatterlayer .trace")
    layout = page.evaluate("document.querySelector('.js-plotly-plot').layout")
    (shape,) = layout["shapes"]
    assert shape["x0"] == shape["x1"] == 11.5            # between v12 and v13
    (note,) = layout["annotations"]
    assert note["text"].startswith("+") and note["text"].endswith(" %")
    table = page.inner_text("table.changes")
    assert "v12 → v13" in table and "+" in table
    assert "steps smaller than" in page.inner_text("p.note")
