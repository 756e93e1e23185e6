"""The dashboard's HTTP side: uvicorn (one event loop, HTTP parsed by httptools) running a
Starlette application, with the pages of web/app.py answered in a bounded thread pool.

What a web page in the user's browser, or a client on the network, must not be able to
do to it:
- read it through DNS rebinding (evil.example resolving to 127.0.0.1): a request
  whose Host is not an address of this server, localhost or a name given with
  --allow-host, at the serving port, gets 403 (HostCheck);
- read it at all, for a team's dashboard on the network, without the token given with
  --token-file (web/token.py);
- change anything: GET and HEAD only, every other method gets 405 (ReadOnly);
- run script in its origin: every answer carries a Content-Security-Policy (only the
  page's own scripts, by nonce; the flame graph SVG in a sandbox of its own);
- take the machine: a connection costs no thread while it sends its request, and each
  request must arrive whole within HEAD_TIMEOUT_S and be answered within
  ANSWER_TIMEOUT_S (Guarded, on top of uvicorn, which bounds neither); at most
  MAX_REQUESTS are answered at once, MAX_WAITING more wait, any beyond get 503.

The measurement that chose this stack over the standard library's ThreadingHTTPServer
is bench/dashboard.py (docs/report-and-dashboard.md, "The web stack").
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
import socket
import sys
import traceback
from collections.abc import Iterable
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response as HttpResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hoplab.store import Store
from hoplab.web.app import Dashboard, Response, gzipped
from hoplab.web.token import TokenCheck

MAX_REQUESTS = 8            # answered at once: two cores; more only queue on the GIL and store
MAX_WAITING = 32            # requests waiting for one of those; more get 503 at once
MAX_CONNECTIONS = 256       # open at once (uvicorn's limit_concurrency): more get 503
HEAD_TIMEOUT_S = 10.0       # from a request's first byte (or the connection) to its last
ANSWER_TIMEOUT_S = 60.0     # from the request's head to the answer's last byte sent
KEEP_ALIVE_S = 5            # an idle kept-alive connection is closed after this
MAX_HEAD_BYTES = 64 * 1024  # request line and headers; the standard library allows ~6.5 MB
_GZIP_MIN = 1024
SWITCH_INTERVAL_S = 0.001

# A page runs only its own scripts (each carries this answer's nonce) and plotly.js from
# /static; plotly sets inline styles. Nothing is loaded from elsewhere, no form posts
# anywhere else, and no other site may frame it.
PAGE_CSP = ("default-src 'none'; script-src 'self' 'nonce-{nonce}'; style-src 'self' "
            "'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; "
            "object-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; "
            "frame-ancestors 'none'")
# Anything else (JSON, plotly.js, text): nothing in it may run, load or be framed.
OTHER_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox"
# The flame graph SVG carries symbol names from devices. Its own script (hover, zoom,
# search) runs, but in a sandbox: an opaque origin, so it can neither read the dashboard
# nor act as it; the run page may embed it (<object>), no other site may.
SVG_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
           "img-src data:; frame-ancestors 'self'; sandbox allow-scripts")


def split_host(header: str) -> tuple[str, int | None] | None:
    """A Host header's name (lower case, no trailing dot) and port; None if malformed."""
    header = header.strip()
    if header.startswith("["):
        name, sep, rest = header[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else ""
    else:
        name, _, port_text = header.partition(":")
        if ":" in port_text:
            return None
    if port_text and not (port_text.isascii() and port_text.isdigit() and len(port_text) < 6):
        return None
    name = name.lower().rstrip(".")
    return (name, int(port_text) if port_text else None) if name else None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def host_allowed(header: str | None, bound: str, port: int, names: Iterable[str] = ()
                 ) -> bool:
    """Whether a request with this Host header may be answered by a server bound to
    `bound`:`port`. An IP address cannot be rebound, so the server's own is accepted
    (any, when bound to all addresses); of the names only localhost (which browsers
    keep on loopback) and `names`, since any other name may resolve to us from afar.
    (Starlette's TrustedHostMiddleware cannot say this: it ignores the port and takes
    names only.)"""
    parsed = split_host(header) if header else None
    if parsed is None:
        return False
    name, asked = parsed
    if (asked if asked is not None else 80) != port:
        return False
    if name == "localhost" or name in {n.lower().rstrip(".") for n in names}:
        return True
    ip, own = _ip(name), _ip(bound)
    if ip is None or own is None:
        return False
    if own.is_unspecified:
        return True
    return ip == own or (ip.is_loopback and own.is_loopback)


def plain(status: int, text: str, headers: dict[str, str] | None = None) -> HttpResponse:
    return HttpResponse(text, status, {"Content-Security-Policy": OTHER_CSP,
                                       "X-Content-Type-Options": "nosniff", **(headers or {})},
                        media_type="text/plain; charset=utf-8")


class ReadOnly:
    """GET and HEAD only: the dashboard never changes anything."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD"):
            await plain(405, "read-only dashboard: GET only\n",
                        {"Allow": "GET, HEAD"})(scope, receive, send)
            return
        await self.app(scope, receive, send)


class HostCheck:
    """403 for a Host that is not this server's (see host_allowed), against DNS rebinding."""

    def __init__(self, app: ASGIApp, bound: str, port: int, names: Iterable[str]) -> None:
        self.app, self.bound, self.port, self.names = app, bound, port, tuple(names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            hosts = [v for k, v in scope["headers"] if k == b"host"]
            header = hosts[0].decode("latin-1") if len(hosts) == 1 else None
            if not host_allowed(header, self.bound, self.port, self.names):
                await plain(403, f"Host {header!r} is not this dashboard's address; open "
                            f"{_url(self.bound, self.port)} (or start hoplab serve with "
                            "--allow-host NAME)\n")(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Pages:
    """Answers a request with web/app.py's Dashboard in a worker thread (the store's
    drivers block): at most MAX_REQUESTS at once, MAX_WAITING waiting, the rest 503."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard
        self.limiter = anyio.CapacityLimiter(MAX_REQUESTS)
        self.in_flight = 0

    async def answer(self, request: Request) -> HttpResponse:
        if self.in_flight >= MAX_REQUESTS + MAX_WAITING:
            return plain(503, f"busy: {MAX_REQUESTS} requests are being answered and "
                         f"{MAX_WAITING} wait; try again\n", {"Retry-After": "1"})
        scope = request.scope
        target = scope["raw_path"].decode("latin-1")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        self.in_flight += 1
        try:
            resp = await anyio.to_thread.run_sync(self._handle, target, limiter=self.limiter)
        finally:
            self.in_flight -= 1
        return _http(resp, "gzip" in request.headers.get("accept-encoding", ""))

    def _handle(self, target: str) -> Response:
        try:
            return self.dashboard.handle(target)
        except Exception:       # a bug: say so, keep serving
            traceback.print_exc(file=sys.stderr)
            return Response(500, b"internal error (see the server's log)\n",
                            "text/plain; charset=utf-8")


def _http(resp: Response, gzip_ok: bool) -> HttpResponse:
    """The Dashboard's answer with its security headers (a fresh script nonce for a page)."""
    body, headers = resp.body, dict(resp.headers)
    if resp.content_type.startswith("text/html"):
        nonce = secrets.token_urlsafe(16)
        # Every value from a run is HTML-escaped and chart JSON escapes "<", so each
        # "<script>" in a page is one of its own.
        body = body.replace(b"<script>", f'<script nonce="{nonce}">'.encode())
        headers["Content-Security-Policy"] = PAGE_CSP.format(nonce=nonce)
    elif resp.content_type.startswith("image/svg+xml"):
        headers["Content-Security-Policy"] = SVG_CSP
    else:
        headers["Content-Security-Policy"] = OTHER_CSP
    if len(body) >= _GZIP_MIN and gzip_ok:
        body = gzipped(body)
        headers["Content-Encoding"] = "gzip"
    headers.update({"X-Content-Type-Options": "nosniff", "Vary": "Accept-Encoding",
                    "Referrer-Policy": "no-referrer"})
    return HttpResponse(body, resp.status, headers, media_type=resp.content_type)


class Guarded(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with what it lacks against slow and greedy clients:
    its keep-alive timeout is reset by every byte, so a client trickling a header line
    every few seconds would hold its connection for ever, and the request head's size is
    unbounded. Here each request must arrive whole within HEAD_TIMEOUT_S of its first
    byte (of the connection, for the first) and be answered within ANSWER_TIMEOUT_S, and
    its head may take MAX_HEAD_BYTES; past either the connection is dropped."""

    _deadline: asyncio.TimerHandle | None = None
    _head = 0                   # bytes of the request head received so far; -1: head done

    def _arm(self, seconds: float) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing() or self.transport.get_write_buffer_size():
            self.transport.abort()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(HEAD_TIMEOUT_S)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head >= 0:
            self._head += len(data)
            if self._head > MAX_HEAD_BYTES:
                self._head = -1
                self.send_400_response(f"request head over {MAX_HEAD_BYTES} bytes")
                return
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head < 0:              # a next request on a kept-alive connection
            self._head = 0
            self._arm(HEAD_TIMEOUT_S)

    def on_headers_complete(self) -> None:
        self._head = -1
        self._arm(ANSWER_TIMEOUT_S)
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        # Until the answer has left (a client that reads nothing keeps it buffered) or
        # the next request begins.
        self._arm(ANSWER_TIMEOUT_S)
        super().on_response_complete()


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _log_config(quiet: bool) -> dict[str, Any]:
    """Requests to stderr, one line each (none with --quiet); uvicorn's own news only
    when something is wrong."""
    return {"version": 1, "disable_existing_loggers": False,
            "formatters": {"line": {"format": "%(message)s"}},
            "filters": {"token": {"()": "hoplab.web.token.RedactToken"}},
            "handlers": {"err": {"class": "logging.StreamHandler", "formatter": "line",
                                 "stream": "ext://sys.stderr", "filters": ["token"]}},
            "loggers": {"uvicorn": {"handlers": ["err"], "level": "WARNING",
                                    "propagate": False},
                        "uvicorn.access": {"handlers": ["err"], "propagate": False,
                                           "level": logging.WARNING if quiet else logging.INFO}}}


class DashboardServer:
    """The listening socket (bound at once, so the URL is known and a busy port is an
    error before anything starts) and the uvicorn server that answers on it."""

    def __init__(self, app: ASGIApp, sock: socket.socket, quiet: bool) -> None:
        self.socket = sock
        self.config = uvicorn.Config(
            app, http=Guarded, loop="asyncio", lifespan="off", interface="asgi3",
            log_config=_log_config(quiet), access_log=not quiet, proxy_headers=False,
            server_header=False, limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=KEEP_ALIVE_S, timeout_graceful_shutdown=5, backlog=128)
        self.server = uvicorn.Server(self.config)

    @property
    def bound(self) -> tuple[str, int]:
        host, port = self.socket.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        return _url(*self.bound)

    def serve_forever(self) -> None:
        """Until SIGINT or SIGTERM: uvicorn finishes the answers under way, then puts the
        signal's own handler back and raises the signal again."""
        # The event loop thread takes the GIL back from a thread building a page after
        # at most this long (Python's default 5 ms is paid on every read and write it
        # does): 0.001 s took small answers from 390 to 540 a second (bench/dashboard.py).
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self.server.run(sockets=[self.socket])

    def close(self) -> None:
        self.socket.close()

    def __enter__(self) -> DashboardServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_app(dashboard: Dashboard, bound: str, port: int, allow_hosts: Iterable[str] = (),
             token: str | None = None) -> Starlette:
    guards = [Middleware(ReadOnly),
              Middleware(HostCheck, bound=bound, port=port, names=tuple(allow_hosts))]
    if token is not None:
        guards.append(Middleware(TokenCheck, token=token, plain=plain))
    return Starlette(
        routes=[Route("/{path:path}", Pages(dashboard).answer, methods=["GET", "HEAD"])],
        middleware=guards)


def make_server(store: Store, host: str = "127.0.0.1", port: int = 8080,
                quiet: bool = False, allow_hosts: Iterable[str] = (),
                token: str | None = None) -> DashboardServer:
    """OSError if the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    bound, real_port = (str(x) for x in sock.getsockname()[:2])
    dashboard = Dashboard(store)
    # What changed takes seconds to find in a large store the first time: from now, not
    # from the first request.
    dashboard.warm()
    app = make_app(dashboard, bound, int(real_port), allow_hosts, token)
    return DashboardServer(app, sock, quiet)
