"""Alerts: what a schedule has to tell its team, stored once each (sent or not) so the
dashboard can list them, then POSTed by fleet/schedule/alert_post.py.

An alert's document (docs/schedules.md) is Slack-compatible: `text`, a headline line
per change, and `changes`, one entry per figure that got worse (fleet/schedule/judge.py
change_json), with the failed runs and the benches gone beside them."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from hoplab.fleet.queue.db import connect
from hoplab.fleet.schedule.judge import Failed, Verdict, Worse, change_json, compare_url, pct
from hoplab.fleet.schedule.tables import Conn

SHOWN = 10                  # changes the text lists one by one (the JSON has them all)

PENDING, SENT, FAILED, KEPT = "pending", "sent", "failed", "kept"   # kept: no --alert URL


@dataclass(frozen=True)
class Alert:
    id: int
    schedule: str
    kind: str                       # worse (figures, maybe failed runs too), failed, gone
    text: str
    payload: dict[str, Any]
    state: str                      # pending, sent, failed, kept
    attempts: int
    last_error: str | None
    created_at: dt.datetime
    sent_at: dt.datetime | None

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "schedule": self.schedule, "kind": self.kind,
                "text": self.text, "state": self.state, "attempts": self.attempts,
                "last_error": self.last_error, "created_at": self.created_at.isoformat(),
                "sent_at": self.sent_at.isoformat() if self.sent_at else None,
                "payload": self.payload}


def _variant(variant: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                    for k, v in sorted(variant.items()))


def _where(test: str, variant: Mapping[str, Any]) -> str:
    shown = _variant(variant)
    return test + (f" {shown}" if shown else "")


def headline(schedule: str, w: Worse) -> str:
    """"nightly: goodput -49.0 % [-49.6, -48.3] worse on wan / bulk hops=2"."""
    lo, hi = w.ci_pct
    ci = f" [{lo:.1f}, {hi:.1f}]" if all(map(_finite, w.ci_pct)) else ""
    return (f"{schedule}: {w.metric} {pct(w.change_pct)}{ci} worse on "
            f"{w.experiment} / {_where(w.test, w.variant)}")


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")


def _failed_line(schedule: str, f: Failed) -> str:
    why = f": {f.error}" if f.error else ""
    return f"{schedule}: run {f.run} {f.status} on {_where(f.test, f.variant)}{why}"


def firing_document(schedule: str, verdict: Verdict, *, dashboard: str | None,
                    experiment_id: str, previous: str | None) -> dict[str, Any] | None:
    """The alert of one judged firing, or None when it has nothing to say."""
    if not verdict.worse and not verdict.failed:
        return None
    lines = [headline(schedule, w) for w in verdict.worse[:SHOWN]]
    if len(verdict.worse) > SHOWN:
        lines.append(f"… and {len(verdict.worse) - SHOWN} more figures worse")
    lines += [_failed_line(schedule, f) for f in verdict.failed[:SHOWN]]
    if len(verdict.failed) > SHOWN:
        lines.append(f"… and {len(verdict.failed) - SHOWN} more runs failed")
    if verdict.worse:
        first = verdict.worse[0]
        lines.append(compare_url(dashboard, first.runs_before, first.runs_after))
    return {"text": "\n".join(lines), "schedule": schedule,
            "kind": "worse" if verdict.worse else "failed",
            "experiment_id": experiment_id, "previous_experiment_id": previous,
            "changes": [change_json(w, dashboard) for w in verdict.worse],
            "failed": [{"run": f.run, "test": f.test, "variant": f.variant,
                        "status": f.status, "error": f.error} for f in verdict.failed],
            "benches_gone": []}


def gone_document(schedule: str, bench: str, labels: Mapping[str, str],
                  last_seen: dt.datetime, now: dt.datetime) -> dict[str, Any]:
    minutes = (now - last_seen).total_seconds() / 60
    text = (f"{schedule}: bench {bench} gone: no heartbeat for {minutes:.0f} min (last "
            f"{last_seen.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC)")
    return {"text": text, "schedule": schedule, "kind": "gone", "changes": [], "failed": [],
            "benches_gone": [{"bench": bench, "labels": dict(labels),
                              "last_heartbeat": last_seen.isoformat()}]}


def record(conn: Conn, *, key: str, document: Mapping[str, Any], has_url: bool,
           now: dt.datetime) -> int | None:
    """Store an alert once for `key` (what it is about); its id, or None when one for
    that key was stored before. Call inside the caller's transaction."""
    row = conn.execute(
        """INSERT INTO hoplab_fleet_alerts (schedule, kind, key, text, payload, state,
               created_at, next_at)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
           ON CONFLICT (key) DO NOTHING RETURNING id""",
        (document["schedule"], document["kind"], key, document["text"],
         Jsonb(dict(document)), PENDING if has_url else KEPT, now, now)).fetchone()
    return None if row is None else int(row["id"])


def list_alerts(db_url: str | None, *, limit: int = 100,
                schedule: str | None = None) -> list[Alert]:
    """The newest alerts first (at most `limit`), of one schedule or all: what the
    dashboard and `hoplab schedule alerts` show. Never holds an alert URL. Writes
    nothing: a store where no schedule was ever added has none."""
    with connect(db_url, read_only=True, row_factory=dict_row) as conn:
        row = conn.execute("SELECT to_regclass('hoplab_fleet_alerts') AS t").fetchone()
        if row is None or row["t"] is None:
            return []
        return alerts(conn, limit=limit, schedule=schedule)


def alerts(conn: Conn, *, limit: int = 100, schedule: str | None = None) -> list[Alert]:
    where, args = ("WHERE schedule = %s", [schedule]) if schedule else ("", [])
    rows = conn.execute(
        f"""SELECT id, schedule, kind, text, payload, state, attempts, last_error,
                   created_at, sent_at FROM hoplab_fleet_alerts {where}
            ORDER BY id DESC LIMIT %s""", [*args, limit]).fetchall()
    return [Alert(id=r["id"], schedule=r["schedule"], kind=r["kind"], text=r["text"],
                  payload=r["payload"], state=r["state"], attempts=r["attempts"],
                  last_error=r["last_error"], created_at=r["created_at"],
                  sent_at=r["sent_at"]) for r in rows]

