"""Links that keep the view (issue 21): a view chosen in the dashboard's forms and links
(selections, metrics, filters, order, detector) is in its URL, and its link opens the
same view: the same form, answer, tables and chart data, in a fresh browser window."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers.web import Served

# What a view shows: its form's state, its answer and tables, its charts' data.
STATE = """() => ({
  form: [...document.querySelectorAll('form input, form select')].map(
    e => e.name + '=' + (e.type === 'checkbox' ? e.checked : e.value)),
  answer: [...document.querySelectorAll('.answer, #summary, #count')].map(e => e.innerText),
  tables: [...document.querySelectorAll('table')].map(e => e.innerText),
  charts: [...document.querySelectorAll('script')].map(e => e.textContent).filter(
    t => t.startsWith('hoplabDraw(')),
})"""


def _state(page: Any) -> dict[str, Any]:
    found: dict[str, Any] = page.evaluate(STATE)
    return found


def _same_again(browser: Any, page: Any, served: Served) -> dict[str, Any]:
    """The view `page` shows, checked to open alike from its address (a link copied from
    the address bar) and from its "link to this view", in a window of its own (nothing
    shared with `page` but the HTTP cache of plotly.js within it)."""
    shown = _state(page)
    link = page.get_attribute("#view-link", "href")
    assert link is not None and link.startswith("/")
    context = browser.new_context()
    # What is compared of a chart is the figure the page hands to plotly.js (its inline
    # script), so the windows opened again go without plotly.js itself: 4.8 MB to parse
    # per page, seconds on a busy machine, and no part of the view's state.
    context.route("**/static/plotly.min.js", lambda route: route.abort())
    try:
        for url in (page.url, served.url + link):
            again = context.new_page()
            again.goto(url, wait_until="load")
            assert _state(again) == shown, url
            again.close()
    finally:
        context.close()
    return shown


def test_a_trend_view_opens_again_from_its_link(page: Any, browser: Any,
                                                served: Served) -> None:
    page.goto(served.url + "/trend", wait_until="load")
    page.fill("input[name=metric]", "latency_load")
    page.fill("input[name=by]", "started_at")
    page.fill("input[name=q]", "experiment=lab-a")
    page.select_option("select[name=order]", "time")
    page.select_option("select[name=detector]", "pelt")
    with page.expect_navigation():
        page.click("form button")
    shown = _same_again(browser, page, served)
    assert {"metric=latency_load", "order=time", "detector=pelt",
            "q=experiment=lab-a"} <= set(shown["form"])
    (data,) = shown["charts"]
    figure = json.loads(data[data.index("{"):data.rindex("}") + 1])
    assert len(figure["data"][0]["y"]) == 8         # lab-a's eight runs, not the other's


def test_a_comparison_opens_again_from_its_link(page: Any, browser: Any,
                                                served: Served) -> None:
    page.goto(served.url + "/compare", wait_until="load")
    page.fill("input[name=a]", "qos=off,experiment=lab-a")
    page.fill("input[name=b]", "qos=on")
    page.fill("input[name=metric]", "latency_load,goodput")
    page.check("input[name=per_flow]")
    with page.expect_navigation():
        page.click("form button")
    shown = _same_again(browser, page, served)
    assert {"metric=latency_load,goodput", "per_flow=true"} <= set(shown["form"])
    # The two metrics chosen, and no other.
    (rows,) = [t for t in shown["tables"] if t.startswith("metric")]
    assert [r.split("\t")[0] for r in rows.splitlines()[1:]] == ["loaded RTT", "goodput"]
    assert "against qos=off,experiment=lab-a" in shown["answer"][0]


def test_a_filtered_runs_list_opens_again_from_its_link(page: Any, browser: Any,
                                                        served: Served) -> None:
    page.goto(served.url + "/runs", wait_until="load")
    with page.expect_navigation():
        page.click(".facets a:text-is('on')")
    shown = _same_again(browser, page, served)
    assert "q=qos=on" in shown["form"]
    assert shown["answer"] == ["4 of 9 runs"]
