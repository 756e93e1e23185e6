"""One request cannot take the dashboard's memory or time, whatever numbers it names."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hoplab.analysis.select import select
from hoplab.analysis.series_trend import trend
from hoplab.errors import UsageError
from hoplab.store import open_store
from hoplab.web.app import PAGE_ROWS, Dashboard
from tests.helpers.runs import make_run

# Run in a child whose address space is capped, so that code building a range in
# memory fails there (MemoryError) instead of taking this machine's memory.
_CHILD = textwrap.dedent("""
    import json, resource, sys, time, tracemalloc
    from hoplab.analysis.select import select
    from hoplab.errors import UsageError
    from hoplab.store import open_store
    from hoplab.web.app import Dashboard

    with open_store(sys.argv[1]) as store:
        dash = Dashboard(store)
        dash.handle("/api/runs"), dash.handle("/compare?a=1")   # imports warmed up
        with open("/proc/self/status") as f:
            vm = next(int(l.split()[1]) for l in f if l.startswith("VmSize:")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + 512 * 2**20, resource.RLIM_INFINITY))
        out = {}
        for name, target in json.loads(sys.argv[2]).items():
            tracemalloc.start()
            t0 = time.monotonic()
            resp = dash.handle(target)
            elapsed = time.monotonic() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            out[name] = {"status": resp.status, "seconds": elapsed, "peak": peak,
                         "body": resp.body.decode(errors="replace")}
        try:
            select(store, "1-999999999999,10000000000000")
        except UsageError as exc:
            out["select"] = str(exc)
    print(json.dumps(out))
""")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    with open_store(str(path)) as store:
        for rep in range(1, 5):
            for qos in ("off", "on"):
                store.save_run(make_run(rep=rep, variant={"qos": qos}, goodput=1e6 * rep))
    return path


def test_a_huge_range_is_answered_at_once_in_little_memory(db: Path) -> None:
    targets = {"compare": "/compare?a=1-999999999999&b=8",
               "api": "/api/compare?a=1-999999999999&b=8",
               "beyond_64_bits": "/api/compare?a=1-99999999999999999999999&b=8",
               "all_stored": "/api/compare?a=1-7&b=8"}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(db), json.dumps(targets)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    for name in ("compare", "api", "beyond_64_bits"):
        # The API answers "no run N" as 404, like /api/run/N; the page as a bad form.
        assert out[name]["status"] == (400 if name == "compare" else 404), out[name]
        assert out[name]["seconds"] < 1.0
        assert out[name]["peak"] < 2 * 2**20, f"{name}: {out[name]['peak']} bytes"
    assert "no run 9-999999999999 in sqlite" in out["compare"]["body"]
    assert json.loads(out["api"]["body"])["error"].startswith("no run 9-999999999999 in ")
    assert out["all_stored"]["status"] == 200
    assert out["select"].startswith("no run 9-999999999999, 10000000000000 in ")


def test_ranges_are_checked_in_the_store(db: Path) -> None:
    with open_store(str(db)) as store:
        assert select(store, "2-4,3-5") == [2, 3, 4, 5]
        with pytest.raises(UsageError, match=r"^no run 9, 10, 12-15 in "):
            select(store, "1-10,12-15")
        with pytest.raises(UsageError, match="selects more than 3 runs"):
            select(store, "1-4", limit=3)
        with pytest.raises(UsageError, match="selects more than 3 runs"):
            select(store, "qos=off", limit=3)
        assert select(store, "1-3", limit=3) == [1, 2, 3]


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("many") / "runs.db"
    with open_store(str(path)) as store:
        for rep in range(450):
            store.save_run(make_run(rep=rep, variant={"qos": "on" if rep % 2 else "off"},
                                    goodput=1e6))
    return path


def test_pages_hold_a_bounded_number_of_rows(many: Path) -> None:
    with open_store(str(many)) as store:
        dash = Dashboard(store)
        first = dash.handle("/runs").body.decode()
        assert first.count('href="/run/') == PAGE_ROWS
        assert "runs 1–200 (450 in the store)" in first and "?page=2" in first
        last = dash.handle("/runs?page=3").body.decode()
        assert last.count('href="/run/') == 50 and "?page=2" in last and "?page=4" not in last
        on = dash.handle("/runs?qos=on&page=2").body.decode()
        assert "runs 201–225 of those matching" in on
        assert dash.handle("/runs?page=0").status == 400

        resp = dash.handle("/api/runs?qos=off&limit=200&offset=100")
        assert [r["id"] for r in json.loads(resp.body)] == list(range(201, 450, 2))[:125]
        assert "Link" not in resp.headers
        resp = dash.handle("/api/runs?limit=100")
        assert len(json.loads(resp.body)) == 100
        assert resp.headers["Link"] == '</api/runs?limit=100&offset=100>; rel="next"'
        assert len(json.loads(dash.handle(f"/api/runs?limit={10**9}").body)) == 450
        assert dash.handle("/api/runs?limit=x").status == 400

        with pytest.raises(UsageError, match="more than 100 runs match"):
            trend(store, "goodput", {}, limit=100)
        assert trend(store, "goodput", {"qos": "on"}, by="qos", limit=225) == [("on", 1e6, 225)]
