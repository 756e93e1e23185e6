"""After `make demo`, `hoplab serve` and `hoplab report` answer on their first screen
(issue 21): 100 Mbit/s against 50 Mbit/s, goodput doubled, and what four runs a side
can and cannot say about latency; at a laptop's 1280x800 and a phone's 390x844 in
headless Chromium, with no sideways scrolling. The store holds the demo's own sixteen
runs (tests/data/demo_runs), so the demo's lab is not run here. Screenshots are kept
in the `screens` directory of test_first_screen.py (its path printed with -s)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hoplab.cli.main import main
from tests.helpers.runs import demo_store
from tests.helpers.web import Served, serving
from tests.web.test_first_screen import SCREENS, _fits, _on_first_screen, _open, screens

__all__ = ["screens"]           # the fixture, shared with test_first_screen.py

# The demo's answer: the headline leads with a goodput that doubled (the computed
# +100 %: 100 against 50 Mbit/s of the same frames), then the counts.
HEADLINE = re.compile(r"bottleneck=100mbit against bottleneck=50mbit: goodput (down "
                      r"\(demo / under-load\) )?\+(9\d|10\d)\.\d % \[.*\] better; ")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Served]]:
    where = tmp_path_factory.mktemp("demo")
    assert demo_store(where / "hoplab.db") == list(range(1, 17))
    # As the demo's last lines say: its report, and the dashboard.
    assert main(["report", "1-16", "-o", str(where / "demo.html"),
                 "--db", str(where / "hoplab.db")]) == 0
    with serving(where / "hoplab.db", {}) as served:
        yield where / "demo.html", served


def _answers(page: Any, screen: str) -> None:
    """The headline, and the demo's goodput and latency rows, on the first screen."""
    _fits(page)
    assert HEADLINE.match(_on_first_screen(page, "#headline"))
    rows = page.locator("table.biggest tbody tr")
    first = _on_first_screen(page, "table.biggest tbody tr")
    assert "goodput" in first and "better" in first
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    tcp = next(t for t in texts if "demo / tcp-up: goodput" in t)
    assert "47.9 Mbit/s → 95.7 Mbit/s" in tcp and "+99.8 %" in tcp
    loaded = next(i for i, t in enumerate(texts) if "loaded RTT" in t)
    # Four runs a side cannot tell this latency change: it says what they could see.
    assert re.search(r"-39\.5 %.*no clear difference \(these runs would see ±\d+\.\d %\)",
                     texts[loaded].replace("\n", " ").replace("\t", " "))
    if screen == "laptop":
        _on_first_screen(page, f"table.biggest tbody tr:nth-child({loaded + 1})")


@pytest.mark.parametrize(("screen", "width", "height"), SCREENS)
def test_the_demo_report_answers_on_its_first_screen(
        browser: Any, demo: tuple[Path, Served], screens: Path, screen: str, width: int,
        height: int) -> None:
    page, errors = _open(browser, demo[0].as_uri(), width, height)
    try:
        page.screenshot(path=str(screens / f"demo-report-{screen}.png"))
        _answers(page, screen)
        assert not errors, errors
    finally:
        page.context.close()


@pytest.mark.parametrize(("screen", "width", "height"), SCREENS)
def test_the_demo_dashboard_answers_on_its_first_screen(
        browser: Any, demo: tuple[Path, Served], screens: Path, screen: str, width: int,
        height: int) -> None:
    page, errors = _open(browser, demo[1].url + "/", width, height)
    try:
        page.wait_for_selector("#latest", timeout=60_000)
        page.screenshot(path=str(screens / f"demo-home-{screen}.png"))
        _answers(page, screen)
        assert "The latest experiment: demo (16 runs" in page.inner_text("#latest h2")
        assert not errors, errors
    finally:
        page.context.close()
