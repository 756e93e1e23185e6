"""The answer is on the first screen (issue 21): the report and the dashboard's home in
headless Chromium, at a laptop's 1280x800 and a phone's 390x844: no sideways scrolling,
the headline and the biggest change within the first screen, the report's runs table
last and fitting 1280 px. The screenshots are kept as the tests' artifacts, in the
directory `screens` under the session's pytest temporary directory (its path is printed
with -s, and each test's failure message names it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hoplab.render.report import build_report
from hoplab.store import open_store
from tests.helpers.versions import add_history
from tests.helpers.web import Served, sample_runs, serving

SCREENS = (("laptop", 1280, 800), ("phone", 390, 844))


@pytest.fixture(scope="module")
def screens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("screens")
    print(f"screenshots in {path}")
    return path


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two reports: QoS off against on (four rrul runs a side), and a 60-version history
    with steps of +25, -15 and -49 % (tests/helpers/versions.py)."""
    out = {}
    for name in ("qos", "history"):
        where = tmp_path_factory.mktemp(name)
        with open_store(str(where / "runs.db")) as store:
            if name == "qos":
                ids = [store.save_run(r) for role, r in sample_runs() if role != "nasty"]
            else:
                ids = add_history(store)
            runs = [store.get_run(i) for i in ids]
        out[name] = where / "report.html"
        out[name].write_text(build_report(runs, "test store"), encoding="utf-8")
    return out


def _open(browser: Any, url: str, width: int, height: int) -> tuple[Any, list[str]]:
    """The page at `url` in a fresh window of this size, loaded; the list its script
    errors and any request leaving the machine are added to."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def refuse(route: Any) -> None:
        errors.append(f"request to {route.request.url}")
        route.abort()

    page.route(re.compile(r"^https?://(?!127\.0\.0\.1:)"), refuse)
    page.goto(url, wait_until="load")
    return page, errors


def _fits(page: Any) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"scrolls sideways: {width[0]} px in a {width[1]} px window"


def _on_first_screen(page: Any, selector: str) -> str:
    box = page.evaluate(f"""() => {{
        const r = document.querySelector({selector!r}).getBoundingClientRect();
        return [r.top, r.bottom, r.right, window.innerHeight, window.innerWidth]; }}""")
    top, bottom, right, height, width = box
    assert top >= 0 and bottom <= height and right <= width, (selector, box)
    text: str = page.inner_text(selector)
    return text


@pytest.mark.parametrize(("screen", "width", "height"), SCREENS)
def test_the_report_answers_on_its_first_screen(browser: Any, reports: dict[str, Path],
                                                screens: Path, screen: str, width: int,
                                                height: int) -> None:
    page, errors = _open(browser, reports["qos"].as_uri(), width, height)
    try:
        page.screenshot(path=str(screens / f"report-qos-{screen}.png"))
        _fits(page)
        headline = _on_first_screen(page, "#headline")
        assert headline.startswith("qos=on against qos=off: added latency -92.0 % ")
        assert headline.endswith(" better; 1 more better, 4 with no clear difference")
        first = _on_first_screen(page, "table.biggest tbody tr")
        assert page.inner_text("table.biggest tbody tr td") == "added latency"
        assert "better" in first
        assert page.inner_text("#counts") == "2 better · 4 no clear difference"
        # The runs table is last, and at 1280 px it fits without scrolling itself.
        last = page.evaluate("""() => {
            const h = [...document.querySelectorAll('h2')].pop();
            const t = document.querySelector('h2#runs ~ table');
            return [h.id, t.scrollWidth, t.clientWidth, t.querySelectorAll('tbody tr').length];
        }""")
        assert last[0] == "runs" and last[3] == 8
        if screen == "laptop":
            assert last[1] <= last[2], f"the runs table is {last[1]} px wide in {last[2]}"
        # Every chart drawn (they are drawn as they come into view): still no sideways
        # scrolling.
        charts = page.locator(".chart").count()
        page.evaluate("""async () => {
            for (const el of document.querySelectorAll('.chart')) {
                el.scrollIntoView();
                await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
            }
        }""")
        page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= "
                               f"{charts}", timeout=120_000)
        _fits(page)
        page.screenshot(path=str(screens / f"report-qos-{screen}-end.png"))
        assert not errors, errors
    finally:
        page.context.close()


@pytest.mark.parametrize(("screen", "width", "height"), SCREENS)
def test_the_report_of_a_history_leads_with_its_newest_regression(
        browser: Any, reports: dict[str, Path], screens: Path, screen: str, width: int,
        height: int) -> None:
    page, errors = _open(browser, reports["history"].as_uri(), width, height)
    try:
        page.screenshot(path=str(screens / f"report-history-{screen}.png"))
        _fits(page)
        headline = _on_first_screen(page, "#headline")
        assert headline.startswith("nat/nat-bulk: goodput -4")
        assert headline.endswith(" worse, v45 → v46; 2 more change points")
        rows = page.locator("table.biggest tbody tr")
        first = _on_first_screen(page, "table.biggest tbody tr")
        assert "v45 → v46" in first and "worse" in first
        assert "v30 → v31" in rows.nth(1).inner_text()      # -15 %: the next regression
        assert "v15 → v16" in rows.nth(2).inner_text()      # +25 %: then the improvement
        assert not errors, errors
    finally:
        page.context.close()


@pytest.fixture(scope="module")
def history_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("served-history") / "runs.db"
    with open_store(str(path)) as store:
        add_history(store)
    with serving(path, {}) as s:
        yield s


@pytest.mark.parametrize(("screen", "width", "height"), SCREENS)
def test_the_dashboard_home_answers_on_its_first_screen(
        browser: Any, history_served: Served, screens: Path, screen: str, width: int,
        height: int) -> None:
    page, errors = _open(browser, history_served.url + "/", width, height)
    try:
        # The store is judged from the server's start; the page reloads until then.
        page.wait_for_selector("#answer", timeout=60_000)
        page.screenshot(path=str(screens / f"home-history-{screen}.png"))
        _fits(page)
        answer = _on_first_screen(page, "#answer")
        assert answer.startswith("nat / nat-bulk: goodput -4")
        assert answer.endswith(" worse, v45 → v46; in 1 of 1 series")
        row = _on_first_screen(page, "#changes tbody tr")
        assert "v45 → v46" in row and "worse" in row
        page.click("#changes a:text('trend')")
        page.wait_for_selector("#step")
        assert page.inner_text("#step") == "v45 → v46"
        assert not errors, errors
    finally:
        page.context.close()
