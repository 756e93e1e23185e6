#!/usr/bin/env python3
"""The baseline bench/dashboard.py measures: hoplab serve's HTTP side as it was before
uvicorn and Starlette, on the standard library's ThreadingHTTPServer, answering with the
same Dashboard (web/app.py). Kept only to be measured against; hoplab never runs it.

    .venv/bin/python bench/stdlib_dashboard.py --db runs.db --port 0

What a web page in the user's browser must not be able to do to it:
- read it through DNS rebinding (evil.example resolving to 127.0.0.1): a request
  whose Host is not an address of this server, localhost or a name given with
  --allow-host, at the serving port, gets 403;
- change anything: GET and HEAD only, every other method gets 405;
- take the machine: at most MAX_REQUESTS requests are served at once; up to
  MAX_REFUSALS more get 503 (Retry-After) and any beyond are closed, so the
  threads are bounded; a client that stalls is dropped after CLIENT_TIMEOUT_S.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
import traceback
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hoplab.store import Store, open_store
from hoplab.web.app import Dashboard, Response, gzipped

MAX_REQUESTS = 8            # two cores: more at once only queue on the GIL and the store
MAX_REFUSALS = 32
CLIENT_TIMEOUT_S = 10.0     # per read or write of one request's socket
_GZIP_MIN = 1024


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
    if port_text and not port_text.isdigit():
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
    keep on loopback) and `names`, since any other name may resolve to us from afar."""
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


class Handler(BaseHTTPRequestHandler):
    dashboard: Dashboard        # set on the subclass make_server builds
    quiet = False
    server_version = "hoplab"
    timeout = CLIENT_TIMEOUT_S
    server: DashboardServer

    def do_GET(self) -> None:
        self._reply(head=False)

    def do_HEAD(self) -> None:
        self._reply(head=True)

    def _plain(self, status: HTTPStatus, text: str, *headers: tuple[str, str],
               head: bool = False) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _refuse(self) -> None:
        self._plain(HTTPStatus.METHOD_NOT_ALLOWED, "read-only dashboard: GET only\n",
                    ("Allow", "GET, HEAD"))

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    def _reply(self, head: bool) -> None:
        if self.server.refusing():
            self._plain(HTTPStatus.SERVICE_UNAVAILABLE,
                        f"busy: {MAX_REQUESTS} requests are being answered; try again\n",
                        ("Retry-After", "1"), head=head)
            return
        host = self.headers.get("Host")
        if not self.server.host_allowed(host):
            self._plain(HTTPStatus.FORBIDDEN,
                        f"Host {host!r} is not this dashboard's address; open "
                        f"{self.server.url} (or start hoplab serve with --allow-host NAME)\n",
                        head=head)
            return
        try:
            resp = self.dashboard.handle(self.path)
        except Exception:       # a bug must not kill the server thread's client silently
            traceback.print_exc(file=sys.stderr)
            resp = Response(500, b"internal error (see the server's log)\n",
                            "text/plain; charset=utf-8")
        body = resp.body
        if len(body) >= _GZIP_MIN and "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzipped(body)
            resp.headers["Content-Encoding"] = "gzip"
        self.send_response(resp.status)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Vary", "Accept-Encoding")
        for k, v in resp.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        if not self.quiet:
            super().log_message(format, *args)


class DashboardServer(ThreadingHTTPServer):
    """A thread per request, at most MAX_REQUESTS answering and MAX_REFUSALS refusing."""

    daemon_threads = True
    # The listen backlog: connections the kernel holds until accepted (the default 5
    # makes a burst of connections wait a second each for a SYN retry).
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type[Handler],
                 allow_hosts: Iterable[str] = ()) -> None:
        # IPv6 addresses need an AF_INET6 socket; the class attribute is the stdlib's way.
        self.address_family = (socket.AF_INET6 if ":" in address[0] else socket.AF_INET)
        super().__init__(address, handler)
        self._names = tuple(allow_hosts)
        self._working = threading.BoundedSemaphore(MAX_REQUESTS)
        self._refusing = threading.BoundedSemaphore(MAX_REFUSALS)
        self._local = threading.local()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away or stalled past the timeout is no fault of ours, and a
        # traceback for each would flood the log (a refused burst gives one per client).
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)

    @property
    def bound(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return (host.decode() if isinstance(host, bytes) else str(host)), int(port)

    @property
    def url(self) -> str:
        host, port = self.bound
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    def host_allowed(self, header: str | None) -> bool:
        host, port = self.bound
        return host_allowed(header, host, port, self._names)

    def refusing(self) -> bool:
        """Whether this thread was started to answer 503."""
        return bool(getattr(self._local, "refusing", False))

    def process_request(self, request: Any, client_address: Any) -> None:
        if self._working.acquire(blocking=False):
            slot = self._working
        elif self._refusing.acquire(blocking=False):
            slot = self._refusing
        else:                   # past both bounds: no thread, no answer
            self.shutdown_request(request)
            return
        thread = threading.Thread(target=self._serve, args=(request, client_address, slot),
                                  daemon=True)
        try:
            thread.start()
        except BaseException:
            slot.release()
            self.shutdown_request(request)
            raise

    def _serve(self, request: Any, client_address: Any,
               slot: threading.BoundedSemaphore) -> None:
        self._local.refusing = slot is self._refusing
        try:
            self.process_request_thread(request, client_address)
        finally:
            slot.release()


def make_server(store: Store, host: str = "127.0.0.1", port: int = 8080,
                quiet: bool = False, allow_hosts: Iterable[str] = ()) -> DashboardServer:
    handler = type("DashboardHandler", (Handler,), {"dashboard": Dashboard(store),
                                                   "quiet": quiet})
    return DashboardServer((host, port), handler, allow_hosts)


def main() -> int:
    import argparse
    import contextlib
    import signal

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    with open_store(args.db, read_only=True) as store, \
            make_server(store, port=args.port, quiet=args.quiet) as server:
        print(f"stdlib dashboard: {server.url}", flush=True)
        signal.signal(signal.SIGTERM, stop)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
