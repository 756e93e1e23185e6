"""POSTing stored alerts to their schedule's URL, retried with backoff.

Each pending alert due for an attempt is taken under a row lock (FOR UPDATE SKIP
LOCKED), so two benches' ticks never send the same one, and one whose POST hangs
holds only its own row for at most TIMEOUT_S. A failure is stored (attempts, the
error) and tried again after BACKOFF_S[attempts - 1]; after the last it is failed.
The URL is read here, from the schedule's row, and nowhere else: no job argument,
argv or log line holds it, and no error message quotes it."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from psycopg.rows import dict_row

from hoplab.fleet.queue.db import connect
from hoplab.fleet.schedule import alert_addresses
from hoplab.fleet.schedule.alerts import FAILED, PENDING, SENT
from hoplab.fleet.schedule.tables import SCHEDULES, Conn

TIMEOUT_S = 10.0
# Seconds before attempt 2, 3, ...: a webhook down for a deploy is reached within the
# hour; past the last, the alert stays listed as failed.
BACKOFF_S = (30, 60, 120, 300, 600, 1200, 1800)


@dataclass(frozen=True)
class Attempt:
    alert: int
    state: str                      # sent, pending (tried again later), failed
    attempts: int
    error: str | None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer, not a delivery: never followed (a POST turned into a GET to
    another address, counted as sent)."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _opener(allow_link_local: bool) -> urllib.request.OpenerDirector:
    class Http(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = alert_addresses.connect(self.host, self.port, self.timeout or
                                                TIMEOUT_S, allow_link_local)
            if self._tunnel_host:  # type: ignore[attr-defined]
                self._tunnel()  # type: ignore[attr-defined]

    # HTTPSConnection.connect calls super().connect(): Http's, then wraps the socket.
    class Https(http.client.HTTPSConnection, Http):
        pass

    class HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Http, req)

    class HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Https, req)

    return urllib.request.build_opener(_NoRedirect, HttpHandler, HttpsHandler)


def post(url: str, body: bytes, timeout: float = TIMEOUT_S, *,
         allow_link_local: bool = False) -> str | None:
    """POST `body` as JSON; None when the server took it (2xx), else why not, in words
    that never hold the URL. Redirects are not followed (a 3xx is not delivered), and
    a host that is or resolves to a link-local or metadata address is refused unless
    `allow_link_local` (fleet/schedule/alert_addresses.py)."""
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": "hoplab"})
    try:
        with _opener(allow_link_local).open(request, timeout=timeout) as response:
            response.read(65536)
            if not 200 <= response.status < 300:
                return f"HTTP {response.status} {response.reason}"
            return None
    except urllib.error.HTTPError as exc:
        redirect = " (a redirect: not followed)" if 300 <= exc.code < 400 else ""
        return f"HTTP {exc.code} {exc.reason}{redirect}"
    except urllib.error.URLError as exc:
        return f"not reached: {exc.reason}"
    except (OSError, ValueError) as exc:     # timeouts, resets, a malformed URL
        return f"not reached: {type(exc).__name__}"


def _attempt(conn: Conn, now: dt.datetime) -> Attempt | None:
    """Try the next due alert, if any, in its own transaction."""
    with conn.transaction():
        row = conn.execute(
            """SELECT a.id, a.payload, a.attempts, s.alert_url, s.alert_link_local
               FROM hoplab_fleet_alerts a
               LEFT JOIN hoplab_fleet_schedules s ON s.name = a.schedule
               WHERE a.state = %s AND a.next_at <= %s
               ORDER BY a.next_at, a.id LIMIT 1 FOR UPDATE OF a SKIP LOCKED""",
            (PENDING, now)).fetchone()
        if row is None:
            return None
        attempts = row["attempts"] + 1
        if row["alert_url"] is None:
            error: str | None = "the schedule is gone, or has no --alert URL"
            state = FAILED
        else:
            error = post(row["alert_url"], json.dumps(row["payload"]).encode(),
                         allow_link_local=bool(row["alert_link_local"]))
            state = SENT if error is None else \
                PENDING if attempts <= len(BACKOFF_S) else FAILED
        wait = BACKOFF_S[min(attempts, len(BACKOFF_S)) - 1]
        conn.execute(
            """UPDATE hoplab_fleet_alerts SET state = %s, attempts = %s, last_error = %s,
                   next_at = %s, sent_at = %s WHERE id = %s""",
            (state, attempts, error, now + dt.timedelta(seconds=wait),
             now if state == SENT else None, row["id"]))
    return Attempt(alert=row["id"], state=state, attempts=attempts, error=error)


def send_due(db_url: str | None, now: dt.datetime, *, most: int = 20) -> list[Attempt]:
    """Try every alert due at `now` (at most `most`, so a tick stays short)."""
    out: list[Attempt] = []
    with connect(db_url, tables=[SCHEDULES], row_factory=dict_row) as conn:
        while len(out) < most:
            done = _attempt(conn, now)
            if done is None:
                break
            out.append(done)
    return out
