"""`hoplab serve` driven over HTTP and in headless Chromium."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from hoplab.cli.main import build_parser
from tests.helpers.web import HOPLAB, NASTY, Served


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


def test_binds_loopback_by_default(served: Served) -> None:
    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"
    assert "http://127.0.0.1:" in served.first_line       # started without --host
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    other = [str(a) for *_, (a, *_) in socket.getaddrinfo(socket.gethostname(), None,
                                                          socket.AF_INET)
             if not str(a).startswith("127.")]
    for address in other:
        with pytest.raises(OSError), socket.create_connection((address, port), timeout=2):
            pass


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_refuses_everything_but_get(served: Served, method: str) -> None:
    req = urllib.request.Request(served.url + "/", data=b"x=1", method=method)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    with err.value as resp:
        assert resp.code == 405
        assert resp.headers["Allow"] == "GET, HEAD"


def test_json_endpoints(served: Served) -> None:
    status, body = get(served.url + "/api/runs?qos=on")
    assert status == 200
    assert sorted(r["id"] for r in json.loads(body)) == served.ids["qos=on"]
    rid = served.ids["qos=off"][0]
    status, body = get(f"{served.url}/api/run/{rid}/charts")
    figs = {c["title"]: c["figure"] for c in json.loads(body)["charts"]}
    assert set(figs) == {"Throughput and latency", "CPU per core", "RTT distribution"}
    assert len(figs["Throughput and latency"]["data"][0]["x"]) > 50
    status, body = get(f"{served.url}/api/compare?a=qos%3Doff%2Cexperiment%3Dlab-a&b=qos%3Don")
    verdicts = {m["metric"]: m["verdict"] for g in json.loads(body)["groups"]
                for m in g["metrics"]}
    assert verdicts["latency_load"] == "better"
    status, body = get(f"{served.url}/api/trend?metric=latency_load&by=qos&experiment=lab-a")
    assert [p["x"] for p in json.loads(body)["points"]] == ["off", "on"]
    assert get(served.url + "/api/run/999")[0] == 404
    assert get(served.url + "/nowhere")[0] == 404
    status, body = get(served.url + "/static/plotly.min.js")
    assert status == 200 and len(body) > 1_000_000


def test_markup_in_labels_is_shown_as_text(served: Served) -> None:
    text = get(served.url + "/runs")[1].decode()
    assert NASTY not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    rid = served.ids["nasty"][0]
    assert NASTY not in get(f"{served.url}/run/{rid}")[1].decode()


def test_list_loads_and_filters_by_label(served: Served, page: Any) -> None:
    dialogs: list[str] = []

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(served.url + "/runs")
    rows = page.locator("table:not(.kv) tbody tr")
    assert rows.count() == 9
    assert page.get_by_text(NASTY).count() >= 1         # as text, never as markup
    page.fill("input[name=q]", "firmware=v1 qos=on")
    page.click("text=filter")
    page.wait_for_url("**/runs?q=*")
    assert rows.count() == 4
    assert page.inner_text("#count") == "4 of 9 runs"
    page.click(".facets >> text=off")                   # a facet link replaces qos=on
    page.wait_for_url("**qos=off*")
    assert rows.count() == 4
    assert dialogs == []


def test_run_page_draws_a_chart_with_points(served: Served, page: Any) -> None:
    rid = served.ids["qos=on"][0]
    page.goto(f"{served.url}/run/{rid}")
    page.wait_for_selector(".js-plotly-plot .scatterlayer .trace", timeout=20_000)
    points = page.evaluate("document.querySelector('.js-plotly-plot').data[0].x.length")
    assert points > 50
    traces = page.locator(f"#timeline-{rid} .scatterlayer .trace").count()
    assert traces >= 10                                  # 8 flows, the total, two RTTs
    assert page.locator(".js-plotly-plot").count() == 3
    assert "bufferbloat grade" in page.inner_text("table.kv")


def test_compare_page_shows_a_verdict(served: Served, page: Any) -> None:
    page.goto(served.url + "/compare")
    page.fill("input[name=a]", "qos=off,experiment=lab-a")
    page.fill("input[name=b]", "qos=on")
    page.click("button:text('compare')")
    page.wait_for_selector(".verdict")
    row = page.locator("tr").filter(has=page.get_by_role("cell", name="loaded RTT", exact=True))
    assert row.locator(".verdict").inner_text() == "better"
    assert "2 better" in page.inner_text("#summary")
    # The headline `hoplab compare` leads with (render/comparison.py), first.
    assert page.inner_text("#headline").startswith(
        "qos=on against qos=off,experiment=lab-a: added latency -92.0 % [")


def test_compare_page_explains_a_bad_selection(served: Served, page: Any) -> None:
    resp = page.goto(served.url + "/compare?a=qos%3Doff&b=qos%3Doff")
    assert resp.status == 400
    assert "overlap" in page.inner_text("p.worse")


def test_trend_page_draws_the_medians(served: Served, page: Any) -> None:
    page.goto(served.url + "/trend?metric=latency_load&by=qos&experiment=lab-a")
    page.wait_for_selector(".js-plotly-plot .scatterlayer .trace")
    assert page.evaluate("document.querySelector('.js-plotly-plot').data[0].x") == ["off", "on"]


def test_missing_store_is_not_created(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    done = subprocess.run([HOPLAB, "serve", "--db", str(db), "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no store at" in done.stderr
    assert not db.exists()
