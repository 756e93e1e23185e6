"""A real HTTP server on 127.0.0.1, in a thread, standing where a Slack webhook would:
it keeps every POST it is sent and answers each with the next status of a script
(then 200), so a test sees what an alert sender delivered and how it retried."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Hook:
    url: str
    statuses: list[int]
    received: list[dict[str, Any]] = field(default_factory=list)   # every POST's JSON
    answered: list[int] = field(default_factory=list)              # what each got


@contextmanager
def webhook(statuses: Sequence[int] = (), path: str = "/services/T0/B0/s3cr3t",
            location: str | None = None) -> Iterator[Hook]:
    """A server whose URL (with a secret-looking path) is hook.url; stopped after. A 3xx
    answer sends `location` as where to go."""
    lock = threading.Lock()
    hook = Hook(url="", statuses=list(statuses))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:   # where a followed redirect would land
            self.do_POST()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                status = hook.statuses.pop(0) if hook.statuses else 200
                hook.received.append(json.loads(body) if body else {"GET": self.path})
                hook.answered.append(status)
            self.send_response(status)
            if location is not None and 300 <= status < 400:
                self.send_header("Location", location)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # Asked to stop, serve_forever ends at its next poll: 0.5 s by default, paid by each
    # test that starts one (the redirect test starts six: 3 s of its 3.6).
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    hook.url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
