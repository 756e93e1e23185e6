"""`hoplab run` of web tests as a user runs them: nginx on one node, headless Chromium on
another, with known answers from the link (hoplab-wire: exact delay and rate)."""

from __future__ import annotations

import glob
import json
import math
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hoplab.record import RunRecord
from hoplab.store import open_store
from hoplab.tools import nginx, pageload
from tests.helpers.lab import (
    HOPLAB,
    hoplab,
    lab_namespaces,
    live_pids,
    namespaces,
    netns_inode,
    new_lab_name,
    pids_in,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]

# hoplab-wire's rate counts every frame with its Ethernet header: a full TCP segment is
# a 1514-byte frame carrying 1448 bytes (1500 MTU - 20 IP - 20 TCP - 12 of timestamps).
FRAME_PER_PAYLOAD = 1514 / 1448


def _lab(link: str) -> str:
    return f'name = "w"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n' \
           f'emulator = "wire"\n{link}\n'


def _run(tmp_path: Path, link: str, tests: str) -> tuple[dict[str, Any], RunRecord]:
    (tmp_path / "lab.toml").write_text(_lab(link))
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "lab.toml"\nseed = 7\n' + tests)
    db = tmp_path / "runs.db"
    name = new_lab_name()
    proc = hoplab("run", str(exp), "--db", str(db), "--json", "--lab-name", name,
                  timeout=300)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    # nginx and the browser are stopped and reaped; nginx's files went with them.
    assert not live_pids("nginx") and not glob.glob("/tmp/hoplab-run-*/server-*")
    out = json.loads(proc.stdout)
    (run,) = out["runs"]
    with open_store(str(db)) as store:
        return run, store.get_run(run["id"], raw=True)


def _series(rec: RunRecord, name: str) -> list[float]:
    (s,) = [s for s in rec.series if s.name == name and s.flow is not None]
    return s.v


def test_first_byte_of_a_fresh_connection_is_two_round_trips(tmp_path: Path) -> None:
    # 50 ms each way: the handshake is one 100 ms round trip, the request another.
    rtt_ms = 100.0
    run, rec = _run(tmp_path, 'delay = "50ms"', """
[[tests]]
name = "page"
kind = "web"
from = "a"
to = "b"
objects = 2
object_size = "1kb"
loads = 6
timeout = "10s"
""")
    assert run["status"] == "ok", run
    ttfb = _series(rec, "web_ttfb")
    assert len(ttfb) == 6 and run["metrics"]["web_failed"] == 0
    assert run["metrics"]["web_ttfb"] == pytest.approx(statistics.median(ttfb))
    # No load can beat the two round trips. Chromium preconnects to the page's origin as
    # the navigation starts, so its handshake may begin a moment before the stamp the
    # timings count from: 199.3 ms was measured, 1 % short. nginx answers a 1 kB file
    # in well under a millisecond; what comes on top is the browser's own work and, on a
    # busy 2-core machine, its scheduling, which only ever adds: the least disturbed of
    # six loads is the answer. A connection kept from an earlier load (no handshake) or
    # the request's start as the origin would read 100 ms, far outside.
    assert min(ttfb) >= 2 * rtt_ms * 0.98, ttfb
    assert min(ttfb) <= 2 * rtt_ms + 12, ttfb
    assert statistics.median(ttfb) <= 2 * rtt_ms + 100, ttfb
    # The raw output keeps every load as the browser reported it.
    (raw,) = [r for r in rec.raw if r.media_type == "application/x-ndjson"]
    loads = pageload.parse(raw.data.decode()).loads
    assert [x.ttfb_ms for x in loads] == ttfb and all(x.status == 200 for x in loads)
    # DOM content loaded comes after the first byte; the load event after both images,
    # each a further request (at least one more round trip).
    dcl, load = _series(rec, "web_dcl"), _series(rec, "web_load")
    assert all(t <= d <= x for t, d, x in zip(ttfb, dcl, load, strict=True))
    assert min(load) >= 3 * rtt_ms * 0.98, load


def test_a_page_through_a_rate_limited_link_loads_no_faster_than_its_bytes(
        tmp_path: Path) -> None:
    # 10 objects of 50 kB down a 4 Mbit/s link (b -> a is the reverse direction).
    sizes = (50_000,) * 10
    run, rec = _run(tmp_path, 'reverse = { rate = "4mbit" }', """
[[tests]]
name = "page"
kind = "web"
from = "a"
to = "b"
objects = 10
object_size = "50kb"
loads = 3
timeout = "20s"
""")
    assert run["status"] == "ok", run
    # The browser's transfer size is the bodies and each response's HTTP headers.
    size = _series(rec, "web_bytes")
    headers = size[0] - nginx.page_bytes(sizes)
    assert 11 * 150 <= headers <= 11 * 400, headers
    # The link serializes every byte with its frame's headers at 4 Mbit/s: no load can
    # take less; only the requests' round trips and the browser's work come on top.
    floor_ms = [1000 * b * FRAME_PER_PAYLOAD * 8 / 4e6 for b in size]
    load = _series(rec, "web_load")
    assert all(x >= f for x, f in zip(load, floor_ms, strict=True)), (load, floor_ms)
    # The least disturbed load (see the first-byte test) is within 5 % and the idle
    # gaps of a page load (the index before its images are asked for) of that floor.
    assert min(load) <= 1.05 * min(floor_ms) + 150, (load, floor_ms)
    assert math.isclose(floor_ms[0], 1000 * 8 * size[0] * FRAME_PER_PAYLOAD / 4e6)


def test_a_server_that_never_answers_gives_failed_loads(tmp_path: Path) -> None:
    # Nothing b sends reaches a: the connection never opens.
    run, rec = _run(tmp_path, 'reverse = { loss = "100%" }', """
[[tests]]
name = "page"
kind = "web"
from = "a"
to = "b"
objects = 1
loads = 2
timeout = "1s"
""")
    # Failed loads are a measurement, not a failed run.
    assert run["status"] == "ok", run
    assert (run["metrics"]["web_loads"], run["metrics"]["web_failed"]) == (2, 2)
    assert "web_load" not in run["metrics"]
    assert _series(rec, "web_failed") == [1.0, 1.0]
    (raw,) = [r for r in rec.raw if r.media_type == "application/x-ndjson"]
    assert raw.data.count(b"no load event within 1 s") == 2


def test_page_loads_while_bulk_uploads_and_a_flood_fill_the_uplink(tmp_path: Path) -> None:
    # a's uplink: 10 Mbit/s with a 60 kB drop-tail queue, 48 ms when full. Two TCP
    # uploads and a 12 Mbit/s UDP flood keep it full; the page comes down the idle
    # reverse direction, but its handshake and its request each wait in that queue.
    queue_ms = 60_000 * 8 / 10e6 * 1000
    run, rec = _run(tmp_path, 'forward = { rate = "10mbit", queue = "60kb" }', """
[[tests]]
name = "loaded"
kind = "custom"
duration = "8s"

[[tests.flows]]
name = "bulk"
kind = "tcp"
from = "a"
to = "b"
flows = 2

[[tests.flows]]
name = "flood"
kind = "udp"
from = "a"
to = "b"
rate = "12mbit"
length = 1400

[[tests.flows]]
name = "page"
kind = "web"
from = "a"
to = "b"
start = "1s"
objects = 4
object_size = "20kb"
loads = 3
timeout = "5s"
""")
    assert run["status"] == "ok", run
    figures = {(m.name, m.flow): m.value for m in rec.metrics}
    page = "loaded.page"
    # The browser starts in 1-4 s on this loaded machine; the loads it has time for in
    # the flows' 8 s are made, none after.
    assert figures[("web_loads", page)] >= 2 and figures[("web_failed", page)] == 0
    # Unloaded, this link's first byte takes about a millisecond. Loaded, the request
    # waits behind the full queue (the handshake too, unless Chromium's preconnect began
    # it before the navigation's stamp; on a starved CPU its stamps slip by tens of ms):
    # the median is at least one full queue.
    ttfb = _series(rec, "web_ttfb")
    assert statistics.median(ttfb) >= queue_ms, (ttfb, queue_ms)
    # The other flows ran at the same time and kept their own figures.
    assert figures[("loss", "loaded.flood")] > 5
    assert sum(v for (n, f), v in figures.items() if n == "goodput" and f and "bulk" in f) > 0
    # The loads are spread over the flows' 8 s from the page flow's start at 1 s (its
    # client's start; the browser's own takes a while), none starting after them.
    starts = [t for s in rec.series if s.name == "web_load" for t in s.t]
    assert 1.0 <= starts[0] < starts[-1] <= 9.0 + 0.05, starts


def _browsers_in_lab_namespaces() -> set[int]:
    """Browser, driver and server processes in a namespace other than this machine's own
    that no named namespace holds: what a lab taken down would leave running."""
    root = netns_inode(os.getpid())  # this test's own: the machine's (PID 1's is not readable)
    named = pids_in(namespaces())
    return {pid for pid in live_pids("chromium", "chrome_crashpad", "node-MainThread",
                                     "nginx", "python3")
            if netns_inode(pid) not in (root, None) and pid not in named}


def test_sigterm_during_page_loads_leaves_no_browser_or_server(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(_lab('delay = "20ms"'))
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "lab.toml"\n[[tests]]\nname = "page"\nkind = "web"\nfrom = "a"\n'
                   'to = "b"\nloads = 100\ntimeout = "5s"\n')
    name = new_lab_name()
    proc = subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(tmp_path / "runs.db"),
                             "--lab-name", name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # Chromium runs in the client's namespace (Playwright starts it in a session of
        # its own, so it is not in the client's process group).
        deadline = time.monotonic() + 60
        client = f"hoplab-{name}-a"
        while not (live_pids("chromium") & pids_in({client})):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        time.sleep(1.0)  # a load or two under way
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "interrupted" in err, err
    assert lab_namespaces(name) == set()
    deadline = time.monotonic() + 5
    while _browsers_in_lab_namespaces() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _browsers_in_lab_namespaces()
    assert not glob.glob("/tmp/hoplab-run-*/server-*")
    with open_store(str(tmp_path / "runs.db")) as store:
        (run,) = store.list_runs()
    assert run.status == "interrupted"


def test_a_page_over_ipv6(tmp_path: Path) -> None:
    run, rec = _run(tmp_path, 'delay = "10ms"', """
[[tests]]
name = "page"
kind = "web"
from = "a"
to = "b"
objects = 2
loads = 2
timeout = "10s"
family = 6
""")
    assert run["status"] == "ok", run
    (raw,) = [r for r in rec.raw if r.media_type == "application/x-ndjson"]
    res = pageload.parse(raw.data.decode())
    assert res.url.startswith("http://[") and res.url.endswith("]:8080/"), res.url
    assert [x.ok for x in res.loads] == [True, True]
    # Over the 20 ms round trip: the handshake and the request crossed it. Chromium's
    # preconnect may start the handshake a few ms before the stamp the timings count
    # from (37.1 ms was measured against 2 x 20), which at this short RTT is more than
    # the 2 % the 100 ms test allows: three one-way trips at least.
    assert min(x.ttfb_ms or 0 for x in res.loads) >= 1.5 * 20.0
