"""web: page loads timed by a real browser (seed 004's Chrome benchmark in six scenarios).

The `to` node serves a page of `objects` objects of `object_size` bytes each (or
of the sizes listed) with nginx; the `from` node loads it `loads` times in
headless Chromium, a fresh browser context each time, and reports the browser's
own Navigation Timing per load: time to first byte, DOM content loaded, the load
event, and what the page weighed on the wire. A load that does not reach its load
event within `timeout` (or whose page is not a 2xx) is a failed load, counted in
web_failed, never an error of the run. As a flow of a custom test it loads the
page while other flows (bulk uploads, a UDP flood) run: with a duration (the
test's), its loads are spread over it and none starts after it. The browser is
started, and up, before the test's clock (FlowTool.warm): its start-up, 0.6 s here and
once 24.7 s on a busy machine, takes none of the time its loads share with the others.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any

from hoplab.analysis.stats import mean, percentile
from hoplab.errors import HoplabError
from hoplab.kind_registry import BYTES_LIMIT_S, FlowTool, Kind, Option, Reader, register
from hoplab.kinds.figures import figures
from hoplab.kinds.flow import ClientTimes, Outcome, Server, address
from hoplab.lab.plan import Plan
from hoplab.record import Metric, Series
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase, Test
from hoplab.spec.locate import Path
from hoplab.spec.units import parse_size, parse_time
from hoplab.tool_table import need
from hoplab.tools import nginx, pageload

WEB_BASE_PORT = 8080
DEFAULT_OBJECTS = 10
DEFAULT_OBJECT_SIZE = 50_000
DEFAULT_LOADS = 10
DEFAULT_TIMEOUT_S = 30.0
# Without a duration the loads run back to back; hoplab stops a flow of unknown length
# after BYTES_LIMIT_S, so every load's timeout must fit in it with the browser's start.
_UNTIMED_LIMIT_S = BYTES_LIMIT_S - 60.0

# Each of the browser's timings (ms from the navigation's start): the median is the
# figure under the bare name, with its mean and 95th percentile.
TIMINGS = ("ttfb", "dcl", "load")
WEB_METRICS = (*(f"web_{t}{s}" for t in TIMINGS for s in ("", "_mean", "_p95")),
               "web_load_stddev", "web_bytes", "web_loads", "web_failed")


def _objects(value: object) -> int:
    n = ov.positive_int(value) if value != 0 else 0
    if n > 1000:
        raise ValueError(f"a page of at most 1000 objects, got {n}")
    return n


def _object_sizes(value: object) -> tuple[int, ...]:
    """One size for every object ("50kb"), or each object's size (["10kb", "200kb"])."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ValueError("an empty list of object sizes")
    sizes = tuple(parse_size(x) for x in items)
    small = [s for s in sizes if s < nginx.MIN_OBJECT]
    if small:
        raise ValueError(f"an object is at least {nginx.MIN_OBJECT} bytes (an SVG image "
                         f"padded to its size), got {small[0]}")
    return sizes


def _timeout(value: object) -> float:
    seconds = parse_time(value)
    if seconds < 0.5:
        raise ValueError(f"a timeout must be at least 0.5s, got {value!r}")
    return seconds


OPTIONS: dict[str, Option] = {
    "objects": Option(_objects, "images on the page (0-1000), `o1.svg`, `o2.svg`... in "
                                "`index.html`", "10"),
    "object_size": Option(_object_sizes, "each object's size in bytes (at least 75), or a list "
                                         "of sizes: `[\"10kb\", \"200kb\"]` is a page of those "
                                         "two objects, or of `objects` of them in turn",
                          '`"50kb"`'),
    "loads": Option(ov.positive_int, "how many times the page is loaded", "10"),
    "timeout": Option(_timeout, "a load that has not reached its load event by then is a "
                                "failed load", '`"30s"`'),
    "duration": Option(ov.duration, "spread the loads over this time (one every `duration / "
                                    "loads` from the flow's start, straight after a slow "
                                    "one) and start none after it; without it the loads "
                                    "run back to back. The browser is started and up "
                                    "before the test's clock, so its start-up takes no "
                                    "time from the loads. In a custom test, the test's "
                                    "`duration`"),
    "family": Option(ov.family, "4 or 6", "4"),
}


@dataclass(frozen=True)
class WebOptions:
    """A web flow's own options: the sizes of its page's objects, how many loads, each
    one's timeout."""

    objects: tuple[int, ...] = ()
    loads: int | None = None
    timeout_s: float | None = None


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    given = o.get("object_size", (DEFAULT_OBJECT_SIZE,))
    # A list of sizes is the page's objects unless `objects` says how many (then cycled).
    count = o.get("objects", len(given) if "object_size" in o and len(given) > 1
                  else DEFAULT_OBJECTS)
    sizes = tuple(given[i % len(given)] for i in range(count))
    loads, timeout = o.get("loads", DEFAULT_LOADS), o.get("timeout", DEFAULT_TIMEOUT_S)
    duration = o.get("duration")
    if duration is None and loads * timeout > _UNTIMED_LIMIT_S:
        r.ctx.fail((*path, "loads"), f"{loads} loads of up to {timeout:g} s each may take "
                                     f"longer than hoplab lets a flow run "
                                     f"({_UNTIMED_LIMIT_S:g} s): give fewer loads, a "
                                     f"shorter timeout or a duration")
    return [Flow(name=name, kind="web", src=src, dst=dst, start_s=o.get("start", 0.0),
                 duration_s=duration, family=o.get("family", 4),
                 options=WebOptions(objects=sizes, loads=loads, timeout_s=timeout))], []


def _port(index: int) -> int:
    return WEB_BASE_PORT + index


def _on_this_machine(plan: Plan, flow: Flow, node: str, what: str) -> None:
    """The browser is driven by hoplab's own Python: it runs in a namespace node, not on
    a device (the server, nginx, may: its files are sent there)."""
    if not plan.lab.node(node).node_kind.local:
        raise HoplabError(f"flow {flow.name}: {node} is a device reached over SSH; a web "
                          f"flow's {what} runs in a namespace node of this machine")


def _server(flow: Flow, index: int, plan: Plan) -> Server:
    port, ipv6 = _port(index), flow.family == 6
    objects = flow.options_as(WebOptions).objects
    return Server(flow.dst, "tcp", port, [], files=lambda home: (
        nginx.files(home, port, objects, ipv6), nginx.argv(home)))


def url(flow: Flow, index: int, plan: Plan) -> str:
    host = address(plan, flow.dst, flow.family)
    return f"http://{f'[{host}]' if flow.family == 6 else host}:{_port(index)}/"


def _client(flow: Flow, index: int, plan: Plan, go: FilePath | None = None) -> list[str]:
    _on_this_machine(plan, flow, flow.src, "browser (Chromium)")
    o = flow.options_as(WebOptions)
    # hoplab's own interpreter runs the browser's driver, in the node's namespace.
    return pageload.argv(sys.executable, pageload.Plan(
        url(flow, index, plan), o.loads or DEFAULT_LOADS,
        o.timeout_s or DEFAULT_TIMEOUT_S, flow.duration_s,
        None if go is None else str(go)))


def _warm(flow: Flow, index: int, plan: Plan, go: FilePath) -> list[str]:
    """The browser is started before the test's clock (it takes 0.6 s here, and once
    24.7 s on a busy machine: a page loaded while the other flows run must not wait for
    it), and loads from when `go` says."""
    return _client(flow, index, plan, go)


def _overrun(flow: Flow) -> float:
    """A web flow's last load may start just before its end and take its whole timeout."""
    return flow.options_as(WebOptions).timeout_s or 0.0


def _stats(prefix: str, values: Sequence[float], flow: str | None) -> list[Metric]:
    if not values:
        return []
    return [Metric(prefix, percentile(values, 50), "ms", flow=flow),
            Metric(f"{prefix}_mean", mean(values), "ms", flow=flow),
            Metric(f"{prefix}_p95", percentile(values, 95), "ms", flow=flow)]


def web_metrics(timings: dict[str, list[float]], sizes: Sequence[float], made: int,
                failed: int, flow: str | None) -> list[Metric]:
    """The figures of the loads that completed (each timing's values, in ms, and what each
    load weighed) and the counts of all the loads made."""
    out: list[Metric] = []
    for t in TIMINGS:
        out += _stats(f"web_{t}", timings.get(t, []), flow)
    load = timings.get("load", [])
    if len(load) > 1:
        out.append(Metric("web_load_stddev", statistics.stdev(load), "ms", flow=flow))
    if sizes:
        out.append(Metric("web_bytes", percentile(sizes, 50), "bytes", flow=flow))
    return [*out, Metric("web_loads", float(made), "count", flow=flow),
            Metric("web_failed", float(failed), "count", flow=flow)]


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    res = pageload.parse(text)
    name = out.flow.name
    ok = [x for x in res.loads if x.ok]
    for t in TIMINGS:
        pts = [(x.start - t0, v) for x in ok if (v := getattr(x, f"{t}_ms")) is not None]
        out.series.append(Series(f"web_{t}", "ms", [p[0] for p in pts], [p[1] for p in pts],
                                 flow=name))
    sized = [x for x in ok if x.transfer_bytes is not None]
    out.series.append(Series("web_bytes", "bytes", [x.start - t0 for x in sized],
                             [float(x.transfer_bytes or 0) for x in sized], flow=name))
    if res.failed:
        out.series.append(Series("web_failed", "count", [x.start - t0 for x in res.failed],
                                 [1.0] * len(res.failed), flow=name))
    out.metrics += web_metrics({t: _values(out, f"web_{t}") for t in TIMINGS},
                               _values(out, "web_bytes"), len(res.loads), len(res.failed),
                               name)
    if not res.done:
        out.error = (f"flow {name}: the browser stopped after {len(res.loads)} of "
                     f"{res.planned} loads")
    elif not res.loads and res.duration_s is not None:
        out.error = (f"flow {name}: no page load: the browser took "
                     f"{res.launched_s or 0:g} s to start, the flow's whole "
                     f"{res.duration_s:g} s")


def _values(out: Outcome, series: str) -> list[float]:
    return [v for s in out.series if s.name == series for v in s.v]


def _pooled(test: Test, outcomes: Sequence[Outcome]) -> tuple[list[Metric], dict[str, str]]:
    """Every web flow's loads as one distribution: the run's figures."""
    web = [o for o in outcomes if o.flow.kind == "web"]
    if not web:
        return [], {}
    timings = {t: [v for o in web for v in _values(o, f"web_{t}")] for t in TIMINGS}
    sizes = [v for o in web for v in _values(o, "web_bytes")]
    made = sum(int(o.metric_value("web_loads")) for o in web)
    failed = sum(int(o.metric_value("web_failed")) for o in web)
    return web_metrics(timings, sizes, made, failed, None), {}


KIND = register(Kind(
    name="web", options=OPTIONS, expand=_expand, figures=figures(steps=(_pooled,)),
    headline=("web_load", "web_dcl", "web_ttfb", "web_load_p95", "web_failed"),
    metrics=WEB_METRICS,
    flow=FlowTool(tool="chromium", bulk=False, rtt=False,
                  media_type="application/x-ndjson", server=_server, client=_client,
                  collect=_collect, needs=(need("nginx"),), server_tool="nginx",
                  overrun=_overrun, warm=_warm)))
