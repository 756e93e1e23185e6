"""The report of eighteen real 3-second profiled runs (issue 19: 15.1 MB and 10.4 s to
load): under 6 MB, one copy of plotly.js, series thinned to the screen, charts and
flame graphs drawn as they come into view, and a first paint under 2 s in headless
Chromium (bench/render.py prints the same figures).

Before: 24.5 MB (eighteen flame graphs as base64 SVG, plotly.js inlined as it ships),
first paint 2.8 s, load 37 s on this machine."""

from __future__ import annotations

import base64
import gzip
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from hoplab.cli.main import main
from hoplab.render.decimate import DEFAULT_POINTS
from tests.helpers.runs import report_store
from tests.helpers.web import VIEWPORT, paint

REPORT_MB = 6.0
FIRST_PAINT_S = 2.0


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("weight")
    ids = report_store(tmp / "runs.db")
    assert len(ids) == 18
    out = tmp / "report.html"
    assert main(["report", f"{ids[0]}-{ids[-1]}", "-o", str(out), "--db",
                 str(tmp / "runs.db")]) == 0
    return out


def test_one_packed_plotly_and_thinned_series(report: Path) -> None:
    text = report.read_text()
    assert len(text.encode()) < REPORT_MB * 1e6
    (packed,) = re.findall(r'<script type="application/gzip;base64" id="hoplab-plotly">'
                           r"([^<]*)</script>", text)
    bundle = gzip.decompress(base64.b64decode(packed)).decode()
    assert bundle.count("plotly.js v") >= 1 and len(bundle) > 3e6
    assert "plotly.js v" not in text            # no copy inlined as it ships
    figures = [json.loads(m) for m in re.findall(r'hoplabDraw\("[^"]+", (\{.*?\})\);</script>',
                                                 text)]
    assert len(figures) >= 36                   # throughput and CPU for every run
    assert all(len(t["x"]) <= DEFAULT_POINTS for f in figures for t in f["data"])
    flames = re.findall(r'<div class="flame" data-packed="([^"]+)"', text)
    assert len(flames) == 18
    for name in flames[:2]:
        svg = text.split(f'id="{name}">', 1)[1].split("</script>", 1)[0]
        assert gzip.decompress(base64.b64decode(svg)).startswith(b"<?xml")


def test_charts_and_flame_graphs_are_drawn_as_they_come_into_view(browser: Any,
                                                                   report: Path) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"file://{report}", wait_until="load")
        page.evaluate("window.hoplabReady")       # plotly.js unpacked and run
        # The top of the page is the runs table and the comparison: nothing drawn yet.
        assert page.evaluate("typeof Plotly") == "object"
        assert page.locator(".js-plotly-plot").count() == 0
        assert page.locator("object.flame").count() == 0
        page.locator("#run-1").scroll_into_view_if_needed()
        page.wait_for_selector(".js-plotly-plot .scatterlayer .trace")
        drawn = page.locator(".js-plotly-plot").count()
        assert 1 <= drawn <= 4                  # what is near the screen, not 54 charts
        page.locator(".flame").first.scroll_into_view_if_needed()
        page.wait_for_selector("object.flame")
        assert page.locator("object.flame").count() == 1
        assert not errors, errors
    finally:
        context.close()


def test_first_paint_within_two_seconds(browser: Any, report: Path) -> None:
    loads = [paint(browser, f"file://{report}") for _ in range(3)]
    assert all(not p.errors for p in loads), [p.errors for p in loads]
    # Measured on this 2-core machine shared by eight sessions (load 5-12): 0.4-1.4 s.
    assert statistics.median(p.first_paint_s for p in loads) < FIRST_PAINT_S
