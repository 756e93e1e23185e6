"""Every answer of `hoplab serve` carries a Content-Security-Policy: a page runs only its
own scripts (a fresh nonce each load), and the flame graph SVG, whose symbol names come
from devices, runs in a sandbox of its own (an opaque origin), never as the dashboard."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from hoplab.profile.tools import find
from hoplab.record import Metric, RawOutput, RunRecord
from hoplab.store import open_store
from tests.helpers.web import NASTY, Served, serving

needs_inferno = pytest.mark.skipif(find("inferno-flamegraph") is None,
                                   reason="inferno is installed by make setup")


def fetch(url: str, method: str = "GET", host: str | None = None
          ) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
    if host:
        req.add_header("Host", host)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def test_every_answer_has_one(served: Served) -> None:
    rid = served.ids["qos=on"][0]
    pages = ["/", "/runs", f"/run/{rid}", "/compare?a=qos%3Doff&b=qos%3Don",
             "/trend?metric=goodput&by=qos", "/nowhere", "/run/99999"]
    nonces = set()
    for path in pages:
        _, headers, body = fetch(served.url + path)
        csp = headers["content-security-policy"]
        (nonce,) = re.findall(r"'nonce-([^']+)'", csp)
        nonces.add(nonce)
        assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";")[0]
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
        scripts = re.findall(rb"<script[^>]*>", body)
        # Inline ones by this answer's nonce; plotly.js from /static ('self'), on the
        # pages that draw charts (the others go without its 4.8 MB).
        assert bool(scripts) == (path in (f"/run/{rid}", "/trend?metric=goodput&by=qos"))
        assert all(s == f'<script nonce="{nonce}">'.encode()
                               or s.startswith(b'<script src="/static/') for s in scripts)
    assert len(nonces) == len(pages)                      # a fresh one each answer
    others = [fetch(served.url + "/api/runs"), fetch(served.url + "/static/plotly.min.js"),
              fetch(served.url + "/api/run/99999"), fetch(served.url + "/", "POST"),
              fetch(served.url + "/", host="evil.example")]
    assert [s for s, _, _ in others] == [200, 200, 404, 405, 403]
    for _, headers, _ in others:
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "sandbox" in csp, csp
        assert headers["x-content-type-options"] == "nosniff"


def test_pages_run_their_scripts_under_it(served: Served, page: Any) -> None:
    # The page fixture fails on any script or load the policy refused.
    page.goto(f"{served.url}/run/{served.ids['qos=on'][0]}")
    page.wait_for_selector(".js-plotly-plot .scatterlayer .trace", timeout=20_000)


FOLDED = (f"iperf3-10;main;{NASTY};tcp_sendmsg_[k] 30\n"
          "wireguard-go-11;[wireguard-go] 10\n").encode()


def profiled() -> RunRecord:
    prof = {"status": "ok", "frequency": 999, "phase": "load", "samples": 40,
            "attribution": "host-wide", "top": [[NASTY, 75.0]],
            "categories": {"TCP/UDP endpoints": 75.0}, "by_node": {}}
    return RunRecord(experiment="e", test="t", kind="tcp", repetition=1, variant={},
                     labels={}, started_at=1.7e9, metadata={"profile": prof},
                     metrics=[Metric("goodput", 1e8, "bit/s")],
                     raw=[RawOutput("profile folded", FOLDED)])


@pytest.fixture(scope="module")
def flamed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("flame") / "runs.db"
    with open_store(str(path)) as store:
        rid = store.save_run(profiled())
    with serving(path, {"profiled": [rid]}) as s:
        yield s


# What script in the SVG can reach: its origin, the dashboard's data, the page around it.
PROBE = """async () => {
  let read, parentTitle;
  try { await (await fetch('/api/runs')).text(); read = 'read'; } catch (e) { read = 'refused'; }
  try { parentTitle = parent.document.title; } catch (e) { parentTitle = 'blocked'; }
  return {origin: self.origin, read, parentTitle};
}"""


@needs_inferno
def test_the_flame_graph_is_sandboxed(flamed: Served, browser: Any) -> None:
    rid = flamed.ids["profiled"][0]
    svg_url = f"{flamed.url}/run/{rid}/flamegraph.svg"
    status, headers, body = fetch(svg_url)
    assert status == 200 and headers["content-type"].startswith("image/svg+xml")
    assert b"tcp_sendmsg" in body and NASTY.encode() not in body
    csp = headers["content-security-policy"]
    assert "sandbox allow-scripts" in csp and "allow-same-origin" not in csp

    # A page of its own (not the page fixture): the probe's refused fetch is logged as a
    # policy violation, which is what this test wants to see.
    context = browser.new_context()
    try:
        _probe(context.new_page(), flamed.url, rid, svg_url)
    finally:
        context.close()


def _probe(page: Any, url: str, rid: int, svg_url: str) -> None:
    with page.expect_event("framenavigated", lambda f: f.url == svg_url) as navigated:
        page.goto(f"{url}/run/{rid}")                     # embedded in the run page
    frame = navigated.value
    frame.wait_for_load_state()
    assert frame.evaluate(PROBE) == {"origin": "null", "read": "refused",
                                     "parentTitle": "blocked"}
    page.goto(svg_url)                                    # and opened by itself
    assert page.evaluate(PROBE)["origin"] == "null"
    assert page.evaluate(PROBE)["read"] == "refused"
