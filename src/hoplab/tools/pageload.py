"""Page loads timed by a real browser: Debian's Chromium, headless, driven by Playwright.

`python -m hoplab.tools.pageload URL --loads R` is the client of a web flow
(hoplab.kinds.web). It runs inside the node's namespace (started with the node's
exec argv), so the browser's sockets are the node's. Each load gets a fresh
browser context (no cache, no cookies, no open connection: its first byte costs
a handshake and a request), and reports the browser's own Navigation Timing
(Level 2) entry: time to first byte (responseStart - startTime), DOM content
loaded (domContentLoadedEventEnd), the load event (loadEventEnd), all in ms from
the navigation's start, and what the page and its objects weighed on the wire
(transferSize of the navigation and of every resource entry: bodies and HTTP
headers). A load that does not reach its load event within the timeout, or whose
page does not answer with 2xx, is a failed load, with the browser's reason.

Output: JSON lines. First {"tool": "pageload", ...} (URL, versions, plan), then
one object per load, then {"done": true, "loads": N, "failed": F}. Loads start
every `duration / loads` seconds from the client's start (straight after a slow
one); with a duration, no load starts after it. With --go FILE the client starts
early: once the header is out (the browser up) it waits until FILE holds a Unix
time, and the duration runs from that time, not from its start. This module's
argv() and parse() are pure; only main() imports Playwright.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoplab.tools import ToolOutputError

CHROMIUM = "/usr/bin/chromium"
# As root a sandbox cannot be set up; background networking would add the browser's own
# requests (component updates, safe browsing) to the measured link.
CHROMIUM_ARGS = ("--no-sandbox", "--disable-background-networking")
# The longest a started client waits for its go (hoplab stops it long before), and how
# often it looks: the go's own time is in the file, so the poll adds no error.
GO_WAIT_S = 3600.0
GO_POLL_S = 0.005


@dataclass(frozen=True)
class Plan:
    url: str
    loads: int
    timeout_s: float
    duration_s: float | None = None
    go: str | None = None    # a file: wait, once the browser is up, for the time it holds


def argv(python: str, p: Plan) -> list[str]:
    """The client's argv, with `python` the interpreter hoplab runs on."""
    if p.loads < 1 or p.timeout_s <= 0:
        raise ValueError(f"pageload: loads >= 1 and timeout > 0 ({p})")
    out = [python, "-m", "hoplab.tools.pageload", p.url, "--loads", str(p.loads),
           "--timeout", f"{p.timeout_s:g}"]
    if p.duration_s is not None:
        out += ["--duration", f"{p.duration_s:g}"]
    if p.go is not None:
        out += ["--go", p.go]
    return out


@dataclass(frozen=True)
class Load:
    index: int
    start: float                    # Unix time the navigation started (the browser's clock)
    ok: bool
    ttfb_ms: float | None = None
    dcl_ms: float | None = None
    load_ms: float | None = None
    transfer_bytes: int | None = None
    objects: int | None = None      # resource entries (the page's objects) it fetched
    status: int | None = None       # the page's HTTP status
    error: str | None = None
    # The first byte's parts: the handshake (connectEnd - connectStart) and the request
    # (responseStart - requestStart). Chromium stamps connectStart a few ms after the SYN
    # leaves when it is busy, so these are for reading, not for figures.
    connect_ms: float | None = None
    request_ms: float | None = None


@dataclass(frozen=True)
class Result:
    url: str
    browser: str | None
    planned: int
    loads: list[Load]
    done: bool                      # the closing line was there (not killed part way)
    launched_s: float | None = None  # from the client's exec to the browser being up
    duration_s: float | None = None  # the loads' time, from the client's exec

    @property
    def failed(self) -> list[Load]:
        return [x for x in self.loads if not x.ok]


def _num(doc: dict[str, Any], key: str, line: int) -> float | None:
    v = doc.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ToolOutputError(f"pageload: line {line}: {key} is not a number: {v!r}")
    return float(v)


def parse(text: str) -> Result:
    """The loads a pageload output reports; ToolOutputError naming the line if it is not
    one. An output cut short (the client was stopped) keeps the loads it has."""
    header: dict[str, Any] | None = None
    header_line = 0
    loads: list[Load] = []
    done = False
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(text.splitlines()) and not text.endswith("\n"):
                break  # the last line was being written when the client was stopped
            raise ToolOutputError(f"pageload: line {n} is not JSON ({e.msg})") from None
        if not isinstance(doc, dict):
            raise ToolOutputError(f"pageload: line {n} is not a JSON object")
        if header is None:
            if doc.get("tool") != "pageload":
                raise ToolOutputError("pageload: the first line is not its header")
            header, header_line = doc, n
            continue
        if doc.get("done"):
            done = True
            continue
        start = _num(doc, "start", n)
        if start is None or not isinstance(doc.get("ok"), bool):
            raise ToolOutputError(f"pageload: line {n}: a load needs start and ok")
        size, objects, status = (_num(doc, k, n) for k in ("transfer_bytes", "objects",
                                                            "status"))
        loads.append(Load(
            index=int(_num(doc, "load", n) or 0), start=start, ok=doc["ok"],
            ttfb_ms=_num(doc, "ttfb_ms", n), dcl_ms=_num(doc, "dcl_ms", n),
            load_ms=_num(doc, "load_ms", n),
            transfer_bytes=None if size is None else int(size),
            objects=None if objects is None else int(objects),
            status=None if status is None else int(status),
            error=str(doc["error"]) if doc.get("error") is not None else None,
            connect_ms=_num(doc, "connect_ms", n), request_ms=_num(doc, "request_ms", n)))
    if header is None:
        raise ToolOutputError("pageload: no output")
    return Result(url=str(header.get("url", "")), browser=header.get("browser"),
                  planned=int(header.get("loads", len(loads))), loads=loads, done=done,
                  launched_s=_num(header, "launched_s", header_line),
                  duration_s=_num(header, "duration_s", header_line))


# --- the client (runs in the node's namespace) ---------------------------------------

# Read in the page once its load event is over: the navigation entry and what every
# resource weighed. Resource Timing keeps 250 entries unless told to keep more (the
# init script below raises it before the page's first request).
_TIMING_JS = """() => {
  const nav = performance.getEntriesByType("navigation")[0].toJSON();
  const res = performance.getEntriesByType("resource");
  return {nav: nav, objects: res.length,
          bytes: res.reduce((s, r) => s + r.transferSize, nav.transferSize),
          origin: performance.timeOrigin};
}"""
_KEEP_ENTRIES_JS = "performance.setResourceTimingBufferSize(100000);"
_LOAD_DONE_JS = ("() => performance.getEntriesByType('navigation').length > 0 && "
                 "performance.getEntriesByType('navigation')[0].loadEventEnd > 0")


def _emit(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _fresh(browser: Any) -> tuple[Any, Any]:
    """A new browser context (no cache, no cookies, no connection) and a page in it, made
    before the load's time comes: on a busy machine that takes a good part of a second."""
    context = browser.new_context()
    try:
        context.add_init_script(_KEEP_ENTRIES_JS)
        return context, context.new_page()
    except BaseException:
        context.close()
        raise


def _one(page: Any, url: str, index: int, timeout_s: float) -> dict[str, Any]:
    from playwright.sync_api import Error as PlaywrightError

    started = time.time()
    deadline = time.monotonic() + timeout_s
    try:
        response = page.goto(url, wait_until="load", timeout=timeout_s * 1000)
        # loadEventEnd is set once the load event's handlers have returned.
        left = max(0.001, deadline - time.monotonic())
        page.wait_for_function(_LOAD_DONE_JS, timeout=left * 1000)
        got = page.evaluate(_TIMING_JS)
    except PlaywrightError as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if "Timeout" in type(e).__name__ or "Timeout" in message:
            message = f"no load event within {timeout_s:g} s"
        return {"load": index, "start": started, "ok": False, "error": message}
    nav = got["nav"]
    status = response.status if response is not None else None
    doc: dict[str, Any] = {
        "load": index, "start": got["origin"] / 1000, "status": status,
        "ttfb_ms": nav["responseStart"] - nav["startTime"],
        "dcl_ms": nav["domContentLoadedEventEnd"] - nav["startTime"],
        "load_ms": nav["loadEventEnd"] - nav["startTime"],
        "transfer_bytes": got["bytes"], "objects": got["objects"],
        # Where the first byte's time went: the handshake, then the request.
        "connect_ms": nav["connectEnd"] - nav["connectStart"],
        "request_ms": nav["responseStart"] - nav["requestStart"]}
    ok = status is not None and 200 <= status < 300
    doc["ok"] = ok
    if not ok:
        doc["error"] = f"HTTP status {status}"
    return doc


def _exec_time() -> float:
    """When this process was started (Unix time), not when its imports were done: on a
    busy machine Python takes a second to get here, and the flow's time runs from its
    start."""
    now = time.time()
    try:
        # Field 22 of stat, the start in clock ticks since boot (after the command's ")").
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return now
    return now - max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))


def _await_go(path: Path) -> float:
    """The clock time the runner writes into `path` (atomically) when the flow begins.
    Polled: the runner may be on the other side of a namespace, never of a file system."""
    deadline = time.monotonic() + GO_WAIT_S
    while time.monotonic() < deadline:
        try:
            return float(path.read_text())
        except FileNotFoundError:
            time.sleep(GO_POLL_S)
    raise SystemExit(f"pageload: no start in {path} after {GO_WAIT_S:g} s")


def _stopped(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def run(p: Plan) -> int:
    from playwright.sync_api import sync_playwright

    begun = _exec_time()
    # hoplab stops a client with SIGTERM to its process group, the driver included: the
    # browser (in a session of its own) then dies without removing its
    # org.chromium.Chromium.* directory from its TMPDIR, one left in /tmp per stopped
    # run; and the driver, killed while it cleans up, left the browser's profile
    # (playwright_chromiumdev_profile-*, made in the driver's TMPDIR) once in 3 pool runs
    # of test_web. So this client's TMPDIR, its driver's and browser's with it, is its
    # own, removed on the way out, SIGTERM included.
    signal.signal(signal.SIGTERM, _stopped)
    tmp = tempfile.mkdtemp(prefix="hoplab-pageload-")
    os.environ["TMPDIR"] = tmp
    try:
        _run(p, sync_playwright, begun)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _run(p: Plan, sync_playwright: Any, begun: float) -> None:
    imported = time.time() - begun
    with sync_playwright() as pw:
        # Where a start-up's time went, in the header: twice here one took 24.4-24.7 s
        # (against 0.6-1.9 s, a cold page cache included), cause not found.
        driver = time.time() - begun
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=list(CHROMIUM_ARGS))
        try:
            launched = time.time() - begun
            # The first load's fresh context is made before the header says the client is
            # ready: the first one starts the browser's renderer and network processes,
            # 0.3 s here and over 3 s on a busy machine, which a 3 s flow does not have.
            context, page = _fresh(browser)
            _emit({"tool": "pageload", "url": p.url, "loads": p.loads,
                   "timeout_s": p.timeout_s, "duration_s": p.duration_s,
                   "browser": f"Chromium {browser.version}",
                   "imported_s": round(imported, 3), "driver_s": round(driver, 3),
                   "launched_s": round(launched, 3),
                   "ready_s": round(time.time() - begun, 3)})
            if p.go is not None:
                # Up before the test's clock: the flow's time runs from the runner's go.
                begun = _await_go(Path(p.go))
            # Loads are spread over what is left of the duration once the browser is up.
            first = max(time.time(), begun)   # a go may name a time still to come
            end = None if p.duration_s is None else begun + p.duration_s
            step = 0.0 if end is None else max(0.0, end - first) / p.loads
            made = failed = 0
            for i in range(p.loads):
                if i:
                    context, page = _fresh(browser)
                try:
                    at = first + i * step
                    now = time.time()
                    if at > now:
                        time.sleep(at - now)
                    elif end is not None and now >= end:
                        # The earlier loads, or the browser's start, took the whole
                        # duration: a load now would time a page after the other flows
                        # stopped, and be reported as one made while they ran.
                        break
                    doc = _one(page, p.url, i + 1, p.timeout_s)
                finally:
                    context.close()
                made += 1
                failed += not doc["ok"]
                _emit(doc)
            _emit({"done": True, "loads": made, "failed": failed})
        finally:
            browser.close()


def main(args: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hoplab.tools.pageload",
                                 description="Time page loads with headless Chromium.")
    ap.add_argument("url")
    ap.add_argument("--loads", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per load")
    ap.add_argument("--duration", type=float, default=None,
                    help="spread the loads over this many seconds; start none after it")
    ap.add_argument("--go", default=None, metavar="FILE",
                    help="once the browser is up (the header written), wait until FILE "
                         "holds a Unix time, and run the duration from it")
    o = ap.parse_args(args)
    if o.loads < 1 or o.timeout <= 0 or (o.duration is not None and o.duration <= 0):
        ap.error("--loads must be at least 1, --timeout and --duration positive")
    return run(Plan(o.url, o.loads, o.timeout, o.duration, o.go))


if __name__ == "__main__":
    sys.exit(main())
