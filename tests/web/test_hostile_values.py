"""Well-formed but hostile values in a dashboard URL are refused (4xx) at once: numbers
past 64 bits or past int()'s 4,300 digits, digits int() does not read, and more filters
than any question needs (each a subquery: a thousand cost SQLite a second of CPU)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.web import Served

BIG = "9" * 5000
MANY = "&".join(f"k{i}=v{i}" for i in range(1000))
HOSTILE = [
    "/run/9223372036854775808", "/api/run/9223372036854775808",
    "/api/run/9223372036854775808/charts", "/run/9223372036854775808/flamegraph.svg",
    f"/run/{BIG}", f"/api/run/{BIG}", f"/api/run/{BIG}/charts",
    "/runs?page=%C2%B2", "/runs?page=" + BIG, "/api/runs?limit=%C2%B2", "/api/runs?offset=" + BIG,
    "/runs?id=%C2%B2", "/api/runs?id=" + BIG, "/runs?q=id%3D%C2%B2",
    "/runs?" + MANY, "/api/runs?" + MANY, "/trend?metric=goodput&" + MANY,
    "/api/trend?metric=goodput&" + MANY,
    "/runs?q=" + "+".join(f"k{i}%3Dv" for i in range(1000)),
    f"/compare?a={BIG}&b=1", f"/api/compare?a=1-{BIG}&b=2", "/api/compare?a=%C2%B2&b=1",
]


@pytest.mark.parametrize("target", HOSTILE, ids=lambda t: t[:40])
def test_refused_in_under_100_ms(store_path: tuple[Path, dict[str, list[int]]],
                                 target: str) -> None:
    with open_store(str(store_path[0]), read_only=True) as store:
        dash = Dashboard(store)
        dash.handle("/api/runs?limit=1")                 # imports and the store warmed up
        t0 = time.thread_time()
        resp = dash.handle(target)
        cpu = time.thread_time() - t0
    assert 400 <= resp.status < 500, resp.body[-400:]
    assert cpu < 0.1, f"{cpu:.3f} s of CPU"
    text = resp.body.decode()
    if not target.startswith("/compare"):                # (its form keeps what was typed)
        assert BIG not in text                           # the value is not echoed whole
    if target.startswith("/api/"):
        assert "error" in json.loads(text)


def test_refused_over_http_without_a_traceback(served: Served) -> None:
    for target in HOSTILE[:8] + HOSTILE[14:15]:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(served.url + target, timeout=30)
        with err.value as resp:
            assert 400 <= resp.code < 500, target
    with urllib.request.urlopen(served.url + "/api/runs?limit=1", timeout=30) as ok:
        assert ok.status == 200
