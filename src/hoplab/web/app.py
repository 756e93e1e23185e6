"""`hoplab serve`'s pages and JSON documents: a read-only dashboard over a store.
Nothing here writes to the store, and nothing is fetched from the internet: plotly.js
comes from the installed plotly package. The HTTP side (methods, Host check, request
cap) is in web/server.py.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from hoplab import kinds, metrics, numbers
from hoplab.analysis import detectors
from hoplab.analysis.changes import ChangeIndex, WhatChanged
from hoplab.analysis.groups import compare_groups
from hoplab.analysis.select import check, conditions, select, select_pair
from hoplab.analysis.series_trend import trend_points
from hoplab.analysis.trend import Trend, analyse
from hoplab.analysis.trend import to_json as trend_json
from hoplab.errors import HoplabError, UsageError
from hoplab.jsonsafe import json_safe
from hoplab.kinds import HEADLINES
from hoplab.render import charts
from hoplab.render.charts_overlay import overlay_chart
from hoplab.render.comparison import to_json as comparison_json
from hoplab.render.overlay import groups_of
from hoplab.render.page import plotly_js
from hoplab.render.profile_html import FOLDED, flamegraph_svg
from hoplab.render.report import comparisons
from hoplab.store import Store
from hoplab.store.budget import TooSlow, time_budget
from hoplab.web import pages
from hoplab.web.home import Latest, changes_json
from hoplab.web.views import RESERVED, CompareView, OverlayView, TrendView

_CHART_CACHE = 8            # runs whose chart JSON is kept: a run page is often reloaded
# Rows a page or a JSON answer holds at most, so that one request's time and memory do
# not grow with the store; more are a further page (?page=2, ?offset=N).
PAGE_ROWS = 200
API_ROWS = 1000
FACET_RUNS = 2000           # the newest runs, whose labels and variants offer filter links
TREND_RUNS = 5000
REQUEST_BUDGET_S = 10.0     # of store reads per request (store/budget.py)
CHANGES_WAIT_S = 5.0        # the home waits this long for what changed, then shows the
                            # last answer (or says it is being worked out)
# A compare side reads each run's metrics: a bound keeps one request's memory and time
# bounded whatever the store holds (the CLI has none; it is not open to web pages).
MAX_SIDE_RUNS = 1000
LATEST_RUNS = 200           # the latest experiment's runs the home compares, at most
MAX_OVERLAY_RUNS = 50       # a group's runs, each read with its series
_MOST = 10**12              # a page, limit or offset: past the rows any store holds


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def _html(text: str, status: int = 200) -> Response:
    return Response(status, text.encode())


def _json(data: Any, status: int = 200) -> Response:
    text = json.dumps(data, separators=(",", ":"), default=str, allow_nan=False)
    return Response(status, text.encode(), "application/json")


def _filters(query: dict[str, list[str]]) -> dict[str, str]:
    """Filters from ?key=value parameters and from q="key=value key=value" (or
    "key=value,key=value": the command line's --filter, analysis/select.py)."""
    out = {k: v[-1] for k, v in query.items() if k not in RESERVED and v and v[-1]}
    out.update(conditions((query.get("q") or [""])[-1].split(), "filter"))
    return out


def _number(query: dict[str, list[str]], name: str, default: int, least: int) -> int:
    text = (query.get(name) or [""])[-1].strip()
    return numbers.whole(text, name, least=least, most=_MOST) if text else default


class _Refresher:
    """analysis/changes.py's ChangeIndex of the store, brought up to date in a thread of
    its own: outside any request's time budget, so that judging a large store for the
    first time (seconds for 100,000 runs) is never cut short and started over, and a
    request waits for it a bounded time, then shows the last answer with a note."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.index = ChangeIndex(HEADLINES)
        self.latest: WhatChanged | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._asked = (0, 0)            # the store state the last request saw

    def start(self) -> threading.Event:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._done = threading.Event()
                # A daemon: stopping the server does not wait for a long first pass.
                self._thread = threading.Thread(target=self._run, args=(self._done,),
                                                name="what-changed", daemon=True)
                self._thread.start()
            return self._done

    def _run(self, done: threading.Event) -> None:
        try:
            self.latest, self.error = self.index.refresh(self.store), None
        except Exception as exc:        # said by the next request, which tries again
            self.error = exc
        finally:
            done.set()

    def get(self, wait: float) -> WhatChanged | None:
        self._asked = asked = self.store.state()
        pinned = tuple(sorted(b.id for b in self.store.baselines()))
        deadline = time.monotonic() + wait
        # A pass started for an older state may be under way: then one more.
        while (self.latest is None or self.latest.state != asked
               or self.latest.baselines != pinned) and \
                (left := deadline - time.monotonic()) > 0:
            before = self.latest
            self.start().wait(left)
            if self.error is not None and self.latest is before:
                raise HoplabError(f"cannot find what changed: {self.error}")
        return self.latest

    def state(self) -> tuple[int, int]:
        """The store's state at the last request (what the page says it is behind)."""
        return self._asked


def _detector(query: dict[str, list[str]]) -> str:
    """A trend's change-point detector, as `hoplab trend --detector` takes it (the
    registered ones; empty: the default)."""
    name = (query.get("detector") or [""])[-1].strip()
    return detectors.get(name or detectors.DEFAULT).name


def _metrics(query: dict[str, list[str]]) -> list[str] | None:
    """A comparison's metrics (?metric=goodput,rtt_median: `hoplab compare --metric`);
    None: every one."""
    names = [m.strip() for v in query.get("metric", []) for m in v.split(",") if m.strip()]
    return names or None


def _order(query: dict[str, list[str]]) -> str:
    """A trend's order: natural (v1.9 before v1.10, the default) or time (each value by
    its first run), as `hoplab trend --order` takes them."""
    order = (query.get("order") or ["natural"])[-1].strip() or "natural"
    if order not in ("natural", "time"):
        raise UsageError(f"order {order!r}: use natural or time")
    return order


class Dashboard:
    """Routes a GET to a page or a JSON document. Safe to call from many threads."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.desc = store.describe()
        self._charts: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._changes = _Refresher(store)
        self._latest: tuple[tuple[int, int], Latest | None] | None = None
        self._routes: list[tuple[re.Pattern[str], Callable[..., Response]]] = [
            (re.compile(r"/"), self.home), (re.compile(r"/runs"), self.runs),
            (re.compile(r"/run/([0-9]+)"), self.run),
            (re.compile(r"/run/([0-9]+)/flamegraph\.svg"), self.flame),
            (re.compile(r"/compare"), self.compare), (re.compile(r"/trend"), self.trend),
            (re.compile(r"/overlay"), self.overlay),
            (re.compile(r"/api/runs"), self.api_runs),
            (re.compile(r"/api/run/([0-9]+)"), self.api_run),
            (re.compile(r"/api/run/([0-9]+)/charts"), self.api_charts),
            (re.compile(r"/api/compare"), self.api_compare),
            (re.compile(r"/api/trend"), self.api_trend),
            (re.compile(r"/api/changes"), self.api_changes),
            (re.compile(r"/alerts"), self.alerts), (re.compile(r"/api/alerts"), self.api_alerts),
            (re.compile(r"/fleet"), self.fleet), (re.compile(r"/api/fleet"), self.api_fleet),
            (re.compile(r"/static/plotly\.min\.js"), self.plotly),
            (re.compile(r"/favicon\.ico"), lambda query: Response(204, b"", "image/x-icon")),
        ]

    def handle(self, target: str) -> Response:
        url = urlsplit(target)
        query = parse_qs(url.query)
        api = url.path.startswith("/api/")
        for pattern, handler in self._routes:
            m = pattern.fullmatch(url.path)
            if m:
                try:
                    with time_budget(REQUEST_BUDGET_S):
                        return handler(query, *m.groups())
                except TooSlow:
                    return self._error(503, f"this answer took more than {REQUEST_BUDGET_S:g} s "
                                       "of reading the store; narrow the selection", api)
                except UsageError as exc:
                    status = 404 if str(exc).startswith("no run ") else 400
                    return self._error(status, str(exc), api)
                except HoplabError as exc:
                    return self._error(500, str(exc), api)
        return self._error(404, f"no page {url.path}", api)

    def _error(self, status: int, message: str, api: bool) -> Response:
        if api:
            return _json({"error": message}, status)
        return _html(pages.error_page(status, message, self.desc), status)

    def what_changed(self, wait: float = CHANGES_WAIT_S) -> WhatChanged | None:
        """The store's changes as of now (see _Refresher), waiting at most `wait` seconds
        for them; else the last ones found (None before the first)."""
        return self._changes.get(wait)

    def warm(self) -> None:
        """Start finding what changed now, before the first request asks (hoplab serve)."""
        self._changes.start()

    def home(self, query: dict[str, list[str]]) -> Response:
        if query:
            # The runs list was the home until issue 21: its old links (/?hops=2,
            # /?page=3) keep working.
            return Response(301, b"", headers={"Location": "/runs?" + urlencode(
                [(k, v) for k, vs in query.items() for v in vs])})
        found = self.what_changed()
        return _html(pages.home_page(found, self.desc, self._changes.state(),
                                     self.store.annotations(), self.latest()))

    def latest(self) -> Latest | None:
        """The latest experiment's comparison (its runs split in two by their one varying
        variant or label, as `hoplab report` splits them), kept until the store changes."""
        state = self.store.state()
        with self._lock:
            if self._latest is not None and self._latest[0] == state:
                return self._latest[1]
        try:
            found = self._latest_comparison()
        except (UsageError, TooSlow):   # not comparable, or too long for this request:
            found = None                # the home answers without it
        with self._lock:
            self._latest = (state, found)
        return found

    def _latest_comparison(self) -> Latest | None:
        top = self.store.list_runs(limit=1, newest=True, figures=False)
        if not top or top[0].experiment_id is None:
            return None
        eid = top[0].experiment_id
        mine = self.store.list_runs({"experiment_id": eid, "status": "ok"},
                                    limit=LATEST_RUNS + 1, figures=False)
        if not 2 <= len(mine) <= LATEST_RUNS:
            return None
        trials = metrics.trial_series()
        every, _ = comparisons([self.store.get_run(r.id, series=trials) for r in mine])
        if not every:
            return None
        return Latest(top[0].experiment, eid, tuple(r.id for r in mine), every[0],
                      tuple(every[1:]))

    def api_changes(self, query: dict[str, list[str]]) -> Response:
        found = self.what_changed()
        if found is None or found.state != self._changes.state():
            return Response(503, b'{"error":"still judging the store; try again"}',
                            "application/json", {"Retry-After": "2"})
        return _json(json_safe(changes_json(found, self.store.annotations())))

    def _alerts(self) -> list[Any] | None:
        """The schedules' alerts (fleet/schedule/alerts.py), newest first; None on SQLite."""
        from hoplab.fleet.schedule.alerts import list_alerts

        if self.store.location.backend != "postgresql":
            return None
        url = self.store.location.url.render_as_string(hide_password=False)
        return list_alerts(url, limit=PAGE_ROWS)

    def _fleet(self) -> Any:
        """The fleet's state (fleet/queue/status.py), read without writing; None on SQLite or
        where no bench or submit made the fleet's tables."""
        from hoplab.fleet.queue.status import read_fleet_status

        if self.store.location.backend != "postgresql":
            return None
        return read_fleet_status(self.store.location.url.render_as_string(
            hide_password=False))

    def fleet(self, query: dict[str, list[str]]) -> Response:
        from hoplab.web.fleet import fleet_page

        status = self._fleet()
        alerts = (self._alerts() or [])[:10] if status is not None else []
        return _html(fleet_page(status, alerts, self.desc))

    def api_fleet(self, query: dict[str, list[str]]) -> Response:
        status = self._fleet()
        return _json(json_safe(None if status is None else status.as_json()))

    def alerts(self, query: dict[str, list[str]]) -> Response:
        from hoplab.web.alerts import alerts_page

        return _html(alerts_page(self._alerts(), self.desc))

    def api_alerts(self, query: dict[str, list[str]]) -> Response:
        found = self._alerts()
        return _json(json_safe([a.as_json() for a in found or []]))

    def runs(self, query: dict[str, list[str]]) -> Response:
        filters = _filters(query)
        page = _number(query, "page", 1, 1)
        shown = self.store.list_runs(filters, limit=PAGE_ROWS + 1,
                                     offset=(page - 1) * PAGE_ROWS)
        if not shown and filters:
            self._check(filters)
        facets = self.store.list_runs(limit=FACET_RUNS, newest=True, figures=False)
        return _html(pages.runs_page(
            shown[:PAGE_ROWS], facets, filters, self.desc,
            total=self.store.count_runs(), page=page, more=len(shown) > PAGE_ROWS,
            rows=PAGE_ROWS))

    def _check(self, filters: dict[str, str]) -> None:
        """A filter key or value no run has answers 400 listing those there are, as the
        command line does, rather than an empty list."""
        check(self.store, filters)

    def run(self, query: dict[str, list[str]], run_id: str) -> Response:
        rec = self.store.get_run(numbers.run_id(run_id), series=False)
        return _html(pages.run_page(rec, self.desc))

    def flame(self, query: dict[str, list[str]], run_id: str) -> Response:
        rid = numbers.run_id(run_id)
        svg = flamegraph_svg(self.store.get_run(rid, series=False),
                             self.store.raw_output(rid, FOLDED))
        if svg is None:
            raise HoplabError(f"run {run_id}: no flame graph (is inferno installed?)")
        return Response(200, svg.encode(), "image/svg+xml")

    def _compare(self, query: dict[str, list[str]]) -> tuple[str, str, Any, Any]:
        a, b = ((query.get(k) or [""])[-1].strip() for k in ("a", "b"))
        if not a or not b:
            return a, b, None, None
        ids = select_pair(self.store, a, b, limit=MAX_SIDE_RUNS)
        # As `hoplab compare`: the series of trials (page loads) some medians are judged on.
        trials = metrics.trial_series()
        sides = [[self.store.get_run(i, series=trials) for i in side] for side in ids]
        # As `hoplab compare`: without per_flow, custom tests still compare each flow.
        per_flow = True if _per_flow(query) else kinds.per_flow
        return a, b, compare_groups(sides[0], sides[1], _metrics(query), per_flow=per_flow), ids

    def compare(self, query: dict[str, list[str]]) -> Response:
        view = CompareView(a=(query.get("a") or [""])[-1].strip(),
                                 b=(query.get("b") or [""])[-1].strip(),
                                 metrics=tuple(_metrics(query) or ()),
                                 per_flow=_per_flow(query))
        try:
            _, _, result, ids = self._compare(query)
        except UsageError as exc:
            return _html(pages.compare_page(view, self.desc, error=str(exc)), 400)
        return _html(pages.compare_page(view, self.desc, result, ids))

    def overlay(self, query: dict[str, list[str]]) -> Response:
        view = OverlayView(tuple(s.strip() for s in query.get("sel", []) if s.strip()))
        if not view.selections:
            return _html(pages.overlay_page(view, self.desc))
        try:
            chosen = [(spec, [self.store.get_run(i) for i in
                              select(self.store, spec, limit=MAX_OVERLAY_RUNS)])
                      for spec in view.selections]
            found = overlay_chart(*groups_of(chosen))
        except UsageError as exc:
            return _html(pages.overlay_page(view, self.desc, error=str(exc)), 400)
        return _html(pages.overlay_page(view, self.desc, found))

    def api_compare(self, query: dict[str, list[str]]) -> Response:
        _, _, result, ids = self._compare(query)
        if result is None:
            raise UsageError("give both sides: /api/compare?a=SPEC&b=SPEC")
        # The same document as `hoplab compare --json` (groups, unmatched).
        return _json({"a": ids[0], "b": ids[1], **comparison_json(result)})

    def _trend(self, query: dict[str, list[str]]
               ) -> tuple[str, str, dict[str, str], Any, Trend | None]:
        metric = (query.get("metric") or [""])[-1].strip()
        by = (query.get("by") or ["started_at"])[-1].strip() or "started_at"
        filters = _filters(query)
        detector = _detector(query)
        if not metric:
            return metric, by, filters, None, None
        found = trend_points(self.store, metric, filters, by, order=_order(query),
                             limit=TREND_RUNS)
        if not found and filters:
            self._check(filters)
        # The change points are those `hoplab trend` finds (analysis/trend.py decides).
        return (metric, by, filters, [(p.value, p.median, len(p.values)) for p in found],
                analyse(metric, by, found, detector=detector) if found else None)

    def trend(self, query: dict[str, list[str]]) -> Response:
        step = (query.get("step") or [""])[-1].strip() or None
        try:
            metric, by, filters, points, found = self._trend(query)
        except UsageError as exc:
            view = TrendView(metric=(query.get("metric") or [""])[-1], by="started_at")
            return _html(pages.trend_page(view, self.desc, error=str(exc)), 400)
        view = TrendView(metric=metric, by=by, filters=filters, order=_order(query),
                               detector=_detector(query), step=step)
        return _html(pages.trend_page(view, self.desc, points, found=found,
                                      notes=self.store.annotations()))

    def api_trend(self, query: dict[str, list[str]]) -> Response:
        metric, by, filters, points, found = self._trend(query)
        if points is None:
            raise UsageError("give a metric: /api/trend?metric=goodput&by=hops&test=...")
        return _json(json_safe({"metric": metric, "by": by, "order": _order(query),
                                "detector": _detector(query), "filters": filters,
                                "points": [{"x": x, "median": m, "runs": n}
                                           for x, m, n in points],
                                "change_points": trend_json(found)["change_points"]
                                if found is not None else []}))

    def api_runs(self, query: dict[str, list[str]]) -> Response:
        limit = min(_number(query, "limit", API_ROWS, 0), API_ROWS)
        offset = _number(query, "offset", 0, 0)
        filters = _filters(query)
        runs = self.store.list_runs(filters, limit=limit + 1, offset=offset)
        if not runs and filters and not offset:
            self._check(filters)
        resp = _json(json_safe([dataclasses.asdict(r) for r in runs[:limit]]))
        if len(runs) > limit:
            # The next page, as RFC 8288 says; the body stays a plain list of runs.
            params = {k: v[-1] for k, v in query.items() if k != "offset"}
            params["offset"] = str(offset + limit)
            resp.headers["Link"] = f'</api/runs?{urlencode(params)}>; rel="next"'
        return resp

    def api_run(self, query: dict[str, list[str]], run_id: str) -> Response:
        rec = self.store.get_run(numbers.run_id(run_id), series=False)
        data = dataclasses.asdict(rec)
        data.pop("series"), data.pop("raw")
        return _json(json_safe(data))

    def api_charts(self, query: dict[str, list[str]], run_id: str) -> Response:
        rid = numbers.run_id(run_id)
        with self._lock:
            body = self._charts.get(rid)
            if body is not None:
                self._charts.move_to_end(rid)
        if body is None:
            rec = self.store.get_run(rid)
            found = charts.run_charts(rec)
            body = ('{"charts":[' + ",".join(
                f'{{"id":{json.dumps(c.id)},"title":{json.dumps(c.title)},'
                f'"notes":{json.dumps(c.notes)},"figure":{charts.figure_json(c.figure)}}}'
                for c in found) + "]}").encode()
            with self._lock:
                self._charts[rid] = body
                while len(self._charts) > _CHART_CACHE:
                    self._charts.popitem(last=False)
        return Response(200, body, "application/json")

    def plotly(self, query: dict[str, list[str]]) -> Response:
        return Response(200, _plotly_bytes(), "text/javascript; charset=utf-8",
                        {"Cache-Control": "public, max-age=86400"})


def _per_flow(query: dict[str, list[str]]) -> bool:
    return (query.get("per_flow") or [""])[-1] in ("1", "on", "true")


_BUNDLE: dict[str, bytes] = {}


def _plotly_bytes() -> bytes:
    if "js" not in _BUNDLE:
        _BUNDLE["js"] = plotly_js().encode()
    return _BUNDLE["js"]


def gzipped(body: bytes) -> bytes:
    """`body` gzip-compressed; the plotly bundle once (4.8 MB, 1.4 MB compressed)."""
    if body is _BUNDLE.get("js"):
        if "gz" not in _BUNDLE:
            _BUNDLE["gz"] = gzip.compress(body, 6, mtime=0)
        return _BUNDLE["gz"]
    return gzip.compress(body, 1, mtime=0)
