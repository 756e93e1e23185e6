"""POSTing stored alerts to their schedule's URL, retried with backoff.

Each pending alert due for an attempt is taken under a row lock (FOR UPDATE SKIP
LOCKED), so two benches' ticks never send the same one, and one whose POST hangs
holds only its own row for at most TIMEOUT_S. A failure is stored (attempts, the
error) and tried again after BACKOFF_S[attempts - 1]; after the last it is failed.
The URL is read here, from the schedule's row, and nowhere else: no job argument,
argv or log line holds it, and no error message quotes it."""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from hoplab.fleet.alerts import FAILED, PENDING, SENT
from hoplab.fleet.schedule_db import Conn, connect

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


def post(url: str, body: bytes, timeout: float = TIMEOUT_S) -> str | None:
    """POST `body` as JSON; None when the server took it (2xx), else why not, in words
    that never hold the URL."""
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": "hoplab"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(65536)
            return None
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} {exc.reason}"
    except urllib.error.URLError as exc:
        return f"not reached: {exc.reason}"
    except (OSError, ValueError) as exc:     # timeouts, resets, a malformed URL
        return f"not reached: {type(exc).__name__}"


def _attempt(conn: Conn, now: dt.datetime) -> Attempt | None:
    """Try the next due alert, if any, in its own transaction."""
    with conn.transaction():
        row = conn.execute(
            """SELECT a.id, a.payload, a.attempts, s.alert_url FROM hoplab_fleet_alerts a
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
            error = post(row["alert_url"], json.dumps(row["payload"]).encode())
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
    with connect(db_url) as conn:
        while len(out) < most:
            done = _attempt(conn, now)
            if done is None:
                break
            out.append(done)
    return out
