"""`hoplab run` of web tests as a user runs them: nginx on one node, headless Chromium on
another, with known answers from the link (hoplab-wire: exact delay and rate).

The known-answer tests share one `hoplab run` of one lab (the `runs` fixture). A web run
costs about 4 s beyond its loads whatever the lab (the CLI, the browser's launch, its
teardown), so sharing saves the lab and the CLI only: 42.4 s for the five runs against
44.2 s as five runs, measured together at a load average of 7."""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hoplab.lab.where import netns_prefix
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
RTT_MS = 100.0  # a <-> b: 50 ms each way
# a 10 Mbit/s uplink a -> e with a 60 kB drop-tail queue: 48 ms when full.
QUEUE_MS = 60_000 * 8 / 10e6 * 1000
# The loaded test's flows run this long; its page flow starts at 1 s and makes a load
# every LOADED_S / 3 while the uplink is full.
LOADED_S = 9
# The most a load starts after its planned time: the fresh browser context made first.
CONTEXT_S = 1.0
# {test name: (its run in `hoplab run --json`, the stored run)}
Runs = dict[str, tuple[dict[str, Any], RunRecord]]


def block(header: str, **keys: str | int) -> str:
    """A TOML table of an experiment: `block("[[tests]]", name="page", loads=6)`;
    `from_` is written `from`."""
    def value(v: str | int) -> str:
        return json.dumps(v)
    return "\n".join([header, *(f"{k.rstrip('_')} = {value(v)}" for k, v in keys.items())])


def web(name: str, to: str, *, header: str = "[[tests]]", **keys: str | int) -> str:
    """A web test (or, with header="[[tests.flows]]", a flow) loading a page from a."""
    return block(header, name=name, kind="web", from_="a", to=to, **keys)


def lab(*links: str) -> str:
    """A lab of node a and one node per link, every link through hoplab-wire (exact
    delay and rate on this netem-less kernel); `links` are "NODE: KEYS" lines."""
    nodes = [spec.split(":")[0] for spec in links]
    text = 'name = "w"\n[nodes.a]\n' + "".join(f"[nodes.{n}]\n" for n in nodes)
    for spec in links:
        node, keys = (x.strip() for x in spec.split(":", 1))
        text += f'[[links]]\nbetween = ["a", "{node}"]\nemulator = "wire"\n{keys}\n'
    return text


def run_experiment(tmp: Path, lab_text: str, *tests: str) -> Runs:
    """`hoplab run` as a user types it; {test name: (its --json run, the stored run)}."""
    (tmp / "lab.toml").write_text(lab_text)
    exp = tmp / "exp.toml"
    # No pause between the tests: each starts its own server and browser anyway.
    exp.write_text('lab = "lab.toml"\nseed = 7\npause = "0s"\n' + "\n\n".join(tests) + "\n")
    db = tmp / "runs.db"
    name = new_lab_name()
    proc = hoplab("run", str(exp), "--db", str(db), "--json", "--lab-name", name,
                  timeout=300)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    # nginx and the browser are stopped and reaped; nginx's files went with them.
    assert not live_pids("nginx")
    assert not glob.glob(f"{tempfile.gettempdir()}/hoplab-run-*/server-*")
    with open_store(str(db)) as store:
        return {r["test"]: (r, store.get_run(r["id"], raw=True))
                for r in json.loads(proc.stdout)["runs"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """One `hoplab run` of every known-answer test on one lab: a page 100 ms away (b), a
    server that never answers (c), a 4 Mbit/s downlink (d), a full uplink (e). The lab,
    the CLI and the store cost once, not once a test."""
    return run_experiment(
        tmp_path_factory.mktemp("web"),
        lab('b: delay = "50ms"', 'c: reverse = { loss = "100%" }',
            'd: reverse = { rate = "4mbit" }', 'e: forward = { rate = "10mbit", queue = "60kb" }'),
        web("first-byte", "b", objects=2, object_size="1kb", loads=4, timeout="10s"),
        web("ipv6", "b", objects=2, loads=2, timeout="10s", family=6),
        web("never", "c", objects=1, loads=2, timeout="500ms"),
        web("rate", "d", objects=10, object_size="50kb", loads=3, timeout="20s"),
        block("[[tests]]", name="loaded", kind="custom", duration=f"{LOADED_S}s"),
        block("[[tests.flows]]", name="bulk", kind="tcp", from_="a", to="e", flows=2),
        block("[[tests.flows]]", name="flood", kind="udp", from_="a", to="e", rate="12mbit",
              length=1400),
        web("page", "e", header="[[tests.flows]]", start="1s", objects=4,
            object_size="20kb", loads=3, timeout="5s"))


def _series(rec: RunRecord, name: str) -> list[float]:
    (s,) = [s for s in rec.series if s.name == name and s.flow is not None]
    return s.v


def _loads(rec: RunRecord) -> list[pageload.Load]:
    (raw,) = [r for r in rec.raw if r.media_type == "application/x-ndjson"]
    return pageload.parse(raw.data.decode()).loads


def test_first_byte_of_a_fresh_connection_is_two_round_trips(
        runs: Runs) -> None:
    # 50 ms each way: the handshake is one 100 ms round trip, the request another.
    run, rec = runs["first-byte"]
    assert run["status"] == "ok", run
    ttfb = _series(rec, "web_ttfb")
    assert len(ttfb) == 4 and run["metrics"]["web_failed"] == 0
    assert run["metrics"]["web_ttfb"] == pytest.approx(statistics.median(ttfb))
    # The raw output keeps every load as the browser reported it.
    loads = _loads(rec)
    assert [x.ttfb_ms for x in loads] == ttfb and all(x.status == 200 for x in loads)
    # The request is one round trip, stamped cleanly at both ends (100.6-103 ms measured
    # with the load average at 4); nginx answers a 1 kB file in well under a millisecond,
    # and the browser's scheduling only ever adds: the least disturbed of four loads is
    # the answer.
    request = [x.request_ms or 0 for x in loads]
    assert min(request) >= 0.99 * RTT_MS and min(request) <= RTT_MS + 12, request
    # Before it, the handshake of a fresh connection: another round trip. Chromium
    # preconnects to the page's origin as the navigation starts, so on a busy machine
    # the handshake may begin before the stamp the timings count from (180.7 ms was
    # measured, the handshake 28 ms ahead); a connection kept from an earlier load (no
    # handshake) would read 100 ms.
    # The least disturbed load took two round trips, not three (a handshake or a request
    # too many shows in every load). Not the median: a fresh-clone CI run had three of
    # four loads a round trip late, the pool's other test holding the CPU (the wire's
    # 50 ms delay and the browser both wait for it: connect 87.5 to 196.5 ms), and the
    # fourth at 201.2 ms.
    # Two round trips are told from three halfway between them: the least disturbed
    # load read 239.5 ms once, beside test_bisect_fleet's three benches building.
    assert all(t - r >= RTT_MS / 2 for t, r in zip(ttfb, request, strict=True)), loads
    assert 2 * RTT_MS - 35 <= min(ttfb) < 2.5 * RTT_MS, ttfb
    # DOM content loaded comes after the first byte; the load event after both images,
    # each a further request (at least one more round trip).
    dcl, load = _series(rec, "web_dcl"), _series(rec, "web_load")
    assert all(t <= d <= x for t, d, x in zip(ttfb, dcl, load, strict=True))
    assert min(load) >= 3 * RTT_MS - 35, load


def test_a_page_through_a_rate_limited_link_loads_no_faster_than_its_bytes(
        runs: Runs) -> None:
    # 10 objects of 50 kB down a 4 Mbit/s link (d -> a is the reverse direction).
    sizes = (50_000,) * 10
    run, rec = runs["rate"]
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


def test_a_server_that_never_answers_gives_failed_loads(
        runs: Runs) -> None:
    # Nothing c sends reaches a: the connection never opens.
    run, rec = runs["never"]
    # Failed loads are a measurement, not a failed run.
    assert run["status"] == "ok", run
    assert (run["metrics"]["web_loads"], run["metrics"]["web_failed"]) == (2, 2)
    assert "web_load" not in run["metrics"]
    assert _series(rec, "web_failed") == [1.0, 1.0]
    (raw,) = [r for r in rec.raw if r.media_type == "application/x-ndjson"]
    assert raw.data.count(b"no load event within 0.5 s") == 2


def test_page_loads_while_bulk_uploads_and_a_flood_fill_the_uplink(
        runs: Runs) -> None:
    # Two TCP uploads and a 12 Mbit/s UDP flood keep a's 10 Mbit/s uplink to e full; the
    # page comes down the idle reverse direction, but its handshake and its request
    # each wait in that queue.
    run, rec = runs["loaded"]
    assert run["status"] == "ok", run
    figures = {(m.name, m.flow): m.value for m in rec.metrics}
    page = "loaded.page"
    # The browser is up before the test's clock, so its start-up takes none of the
    # page flow's time: all three loads are made (a CI run whose Chromium took 24.7 s to
    # start made none when the browser started with the flows).
    made = figures[("web_loads", page)]
    assert made == 3 and figures[("web_failed", page)] == 0
    # Unloaded, this link's first byte takes about a millisecond. Loaded, the request
    # waits behind the full queue (the handshake too, unless Chromium's preconnect began
    # it before the navigation's stamp; on a starved CPU its stamps slip by tens of ms):
    # the median of the loads made while the flows ran (a second before their end) is
    # at least one full queue.
    (first_byte,) = [s for s in rec.series if s.name == "web_ttfb" and s.flow == page]
    loaded = [v for t, v in zip(first_byte.t, first_byte.v, strict=True) if t < LOADED_S - 1]
    assert loaded and statistics.median(loaded) >= QUEUE_MS, (first_byte, QUEUE_MS)
    # The other flows ran at the same time and kept their own figures.
    assert figures[("loss", "loaded.flood")] > 5
    assert sum(v for (n, f), v in figures.items() if n == "goodput" and f and "bulk" in f) > 0
    # The loads are spread over the page flow's time from its start at 1 s, one every
    # LOADED_S / 3: each starts on time (a load takes well under the step), later only by
    # the fresh browser context made before it.
    (load,) = [s for s in rec.series if s.name == "web_load" and s.flow == page]
    planned = [1.0 + i * LOADED_S / 3 for i in range(3)]
    late = [t - p for t, p in zip(load.t, planned, strict=True)]
    assert all(-0.01 <= x < CONTEXT_S for x in late), (load.t, planned)


def test_a_page_over_ipv6(runs: Runs) -> None:
    run, rec = runs["ipv6"]
    assert run["status"] == "ok", run
    (raw,) = [r for r in rec.raw if r.media_type == "application/x-ndjson"]
    res = pageload.parse(raw.data.decode())
    assert res.url.startswith("http://[") and res.url.endswith("]:8080/"), res.url
    assert [x.ok for x in res.loads] == [True, True]
    # Over the 100 ms round trip: the request crossed it, and before it the handshake
    # (which Chromium's preconnect may start before the navigation's stamp: see the
    # first-byte test).
    assert min(x.request_ms or 0 for x in res.loads) >= 0.99 * RTT_MS, res.loads
    assert min(x.ttfb_ms or 0 for x in res.loads) >= 2 * RTT_MS - 35, res.loads


def _browsers_in_lab_namespaces() -> set[int]:
    """Browser, driver and server processes in a namespace other than this machine's own
    that no named namespace holds: what a lab taken down would leave running."""
    root = netns_inode(os.getpid())  # this test's own: the machine's (PID 1's is not readable)
    named = pids_in(namespaces())
    return {pid for pid in live_pids("chromium", "chrome_crashpad", "node-MainThread",
                                     "nginx", "python3")
            if netns_inode(pid) not in (root, None) and pid not in named}


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory of the test's own with a short path: Chromium's sockets are
    in it, and a socket's path has at most 107 bytes."""
    d = Path(tempfile.mkdtemp(prefix="hl-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_sigterm_during_page_loads_leaves_no_browser_or_server(tmp_path: Path,
                                                               short_tmp: Path) -> None:
    (tmp_path / "lab.toml").write_text(lab('b: delay = "20ms"'))
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "lab.toml"\n' + web("page", "b", loads=100, timeout="5s") + "\n")
    # A temporary directory of its own: what other tests' browsers and runs leave in
    # /tmp meanwhile is not this run's.
    tmp = short_tmp
    name = new_lab_name()
    proc = subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(tmp_path / "runs.db"),
                             "--lab-name", name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    try:
        # Chromium runs in the client's namespace (Playwright starts it in a session of
        # its own, so it is not in the client's process group).
        deadline = time.monotonic() + 60
        client = f"{netns_prefix(name)}a"
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
    assert not glob.glob(f"{tmp}/hoplab-run-*/server-*")
    # Nor the browser's own directory: stopped with its driver, Chromium leaves its
    # org.chromium.Chromium.* in its TMPDIR (one in /tmp per stopped run, before), which
    # is now the client's own, removed on its way out.
    assert not glob.glob(f"{tmp}/hoplab-pageload-*")
    assert not glob.glob(f"{tmp}/**/org.chromium.Chromium.*", recursive=True)
    with open_store(str(tmp_path / "runs.db")) as store:
        (run,) = store.list_runs()
    assert run.status == "interrupted"
    assert list(tmp.iterdir()) == []    # nor anything else


def test_a_browser_started_early_waits_for_its_go_and_loads_from_its_time(
        tmp_path: Path) -> None:
    """The client as hoplab starts it before the test's clock: up, it waits (however
    long) for the time in its go file, and its duration runs from that time."""
    go = tmp_path / "go"
    # Port 9 refuses: a load fails at once, which is all this needs.
    argv = pageload.argv(sys.executable, pageload.Plan("http://127.0.0.1:9/", 1, 5.0, 30.0,
                                                        str(go)))
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        header = json.loads(proc.stdout.readline())
        assert header["tool"] == "pageload" and header["launched_s"] > 0
        # Up, and waiting: nothing more until the go, and it has not exited.
        assert proc.poll() is None
        at = time.time() + 0.5  # the flow's start, a little ahead, as the runner's clock
        go.with_name("go.part").write_text(f"{at:.6f}\n")
        go.with_name("go.part").replace(go)
        rest, _ = proc.communicate(timeout=60)
    res = pageload.parse(json.dumps(header) + "\n" + rest)
    assert res.done and [x.ok for x in res.loads] == [False]
    # Its one load started at the go's time (it sleeps until then), not when it read it.
    assert 0 <= res.loads[0].start - at < CONTEXT_S
