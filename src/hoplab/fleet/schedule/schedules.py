"""Schedules: an experiment, packed as it was at `hoplab schedule add`, submitted to the
fleet on a cron schedule (UTC unless a time zone is given).

The alert URL is a secret (a Slack webhook): kept in the store, shown only as
`redacted` makes it (scheme://host/…), passed to nothing hoplab starts."""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from psycopg.types.json import Jsonb

from hoplab.errors import HoplabError, UsageError
from hoplab.fleet.schedule import alert_addresses
from hoplab.fleet.schedule.tables import Conn

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
UTC = dt.UTC


@dataclass(frozen=True)
class Schedule:
    name: str
    cron: str
    tz: str
    experiment: str
    source: str
    bundle: str
    benches: tuple[str, ...]
    where: dict[str, str]
    alert: str | None                # shown redacted; None: no alert URL
    dashboard_url: str | None
    added_at: dt.datetime
    alert_link_local: bool = False   # the alert URL may be link-local (alert_addresses)

    def due(self, now: dt.datetime) -> dt.datetime:
        """The latest time at or before `now` the cron expression names (in UTC);
        ScheduleError if it cannot be computed."""
        return last_due(self.cron, self.tz, now)

    def next(self, now: dt.datetime) -> dt.datetime:
        """The first time after `now` the cron expression names (in UTC); ScheduleError
        if it cannot be computed."""
        return next_due(self.cron, self.tz, now)

    def as_json(self, now: dt.datetime) -> dict[str, Any]:
        """Its fields; "next" None and "error" why when its times cannot be computed."""
        try:
            upcoming: str | None = self.next(now).isoformat()
            error = None
        except ScheduleError as e:
            upcoming, error = None, str(e)
        return {"name": self.name, "cron": self.cron, "tz": self.tz,
                "experiment": self.experiment, "source": self.source, "bundle": self.bundle,
                "benches": list(self.benches), "where": self.where, "alert": self.alert,
                "dashboard_url": self.dashboard_url,
                "added_at": self.added_at.isoformat(), "next": upcoming, "error": error}


class ScheduleError(HoplabError):
    """A stored schedule whose times cannot be computed (a cron that never fires, saved
    before it was refused; a time zone this machine no longer knows): it is skipped and
    reported, the other schedules go on."""


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UsageError(f"schedule name {name!r}: letters, digits, '.', '_' and '-', at "
                         "most 63, starting with a letter or digit")
    return name


def check_tz(tz: str) -> str:
    """`tz` if it names a time zone (Europe/Paris, UTC); UsageError naming --tz."""
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--tz {tz!r}: no such time zone (write an IANA name such as "
                         "UTC or Europe/Paris)") from None
    return tz


def check_cron(cron: str, now: dt.datetime | None = None) -> str:
    """`cron` if it is a 5-field cron expression that fires at some time after `now`
    (default: the clock's); UsageError naming --cron."""
    from croniter import croniter

    fields = cron.split()
    if len(fields) != 5 or not croniter.is_valid(" ".join(fields)):
        raise UsageError(f"--cron {cron!r}: not a cron expression of 5 fields (minute hour "
                         'day-of-month month day-of-week), such as "0 2 * * *"')
    try:
        next_due(" ".join(fields), "UTC", now or dt.datetime.now(UTC))
    except ScheduleError:
        raise UsageError(f"--cron {cron!r}: never fires (no date has that day of that "
                         "month, such as the 31st of February)") from None
    return " ".join(fields)


def check_alert(url: str, *, link_local: bool = False) -> str:
    """`url` if it is an http(s) URL with a host that is not, and does not resolve to, a
    link-local or metadata address (unless `link_local`); the error never shows it
    whole. A name that does not resolve now is taken: the sender checks again."""
    try:
        parts = urlsplit(url)
        host, port, scheme = parts.hostname, parts.port, parts.scheme
    except ValueError:      # a bad port, say
        host = port = scheme = None
    if scheme not in ("http", "https") or not host:
        raise UsageError(f"--alert {redacted(url)}: give an http:// or https:// URL (a "
                         "Slack incoming webhook, say)")
    if link_local:
        return url
    try:
        alert_addresses.check(host, port or (443 if scheme == "https" else 80))
    except alert_addresses.Forbidden as e:
        raise UsageError(f"--alert {redacted(url)}: {e}") from None
    except OSError:
        pass
    return url


def redacted(url: str | None) -> str | None:
    """scheme://host/… : enough to tell two webhooks apart, nothing to post to."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
    except ValueError:
        return "…"
    rest = "/…" if (parts.path not in ("", "/") or parts.query) else ""
    return f"{parts.scheme or '?'}://{host}{rest}"


def _computed(cron: str, tz: str, now: dt.datetime, forward: bool) -> dt.datetime:
    from croniter import croniter

    try:
        local = now.astimezone(zoneinfo.ZoneInfo(tz))
        if forward:
            found: dt.datetime = croniter(cron, local).get_next(dt.datetime)
        else:
            # croniter's get_prev is strictly before its start: start a second later.
            found = croniter(cron, local + dt.timedelta(seconds=1) - dt.timedelta(
                microseconds=local.microsecond)).get_prev(dt.datetime)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, KeyError) as e:
        # croniter's errors are ValueErrors: CroniterBadDateError for a date that never is.
        why = ("it never fires" if type(e).__name__ == "CroniterBadDateError"
               else f"{type(e).__name__}: {e}")
        raise ScheduleError(f'cron "{cron}" ({tz}): its times cannot be computed: '
                            f"{why}") from None
    return found.astimezone(UTC)


def last_due(cron: str, tz: str, now: dt.datetime) -> dt.datetime:
    """The latest time at or before `now` that `cron` (read in `tz`) names, in UTC;
    ScheduleError if it cannot be computed."""
    return _computed(cron, tz, now, forward=False)


def next_due(cron: str, tz: str, now: dt.datetime) -> dt.datetime:
    """The first time after `now` that `cron` (read in `tz`) names, in UTC;
    ScheduleError if it cannot be computed."""
    return _computed(cron, tz, now, forward=True)


def _row(r: Mapping[str, Any], secret: bool) -> Schedule:
    return Schedule(name=r["name"], cron=r["cron"], tz=r["tz"], experiment=r["experiment"],
                    source=r["source"], bundle=r["bundle"], benches=tuple(r["benches"]),
                    where=dict(r["where"]),
                    alert=r["alert_url"] if secret else redacted(r["alert_url"]),
                    dashboard_url=r["dashboard_url"], added_at=r["added_at"],
                    alert_link_local=bool(r.get("alert_link_local")))


def save(conn: Conn, *, name: str, cron: str, tz: str, experiment: str, source: str,
         bundle: str, benches: Sequence[str], where: Mapping[str, str], alert: str | None,
         dashboard_url: str | None, now: dt.datetime, alert_link_local: bool = False
         ) -> bool:
    """Add the schedule, or replace the one of that name; True if it replaced one."""
    with conn.transaction():
        old = conn.execute("SELECT 1 FROM hoplab_fleet_schedules WHERE name = %s FOR UPDATE",
                           (name,)).fetchone()
        conn.execute(
            """INSERT INTO hoplab_fleet_schedules (name, cron, tz, experiment, source, bundle,
                   benches, "where", alert_url, dashboard_url, added_at, alert_link_local)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
               ON CONFLICT (name) DO UPDATE SET cron = EXCLUDED.cron, tz = EXCLUDED.tz,
                   experiment = EXCLUDED.experiment, source = EXCLUDED.source,
                   bundle = EXCLUDED.bundle, benches = EXCLUDED.benches,
                   "where" = EXCLUDED."where", alert_url = EXCLUDED.alert_url,
                   dashboard_url = EXCLUDED.dashboard_url, added_at = EXCLUDED.added_at,
                   alert_link_local = EXCLUDED.alert_link_local""",
            (name, cron, tz, experiment, source, bundle, Jsonb(list(benches)),
             Jsonb(dict(where)), alert, dashboard_url, now, alert_link_local))
    return old is not None


def schedules(conn: Conn, *, secret: bool = False) -> list[Schedule]:
    """Every schedule, by name; the alert URL redacted unless `secret` (the sender)."""
    rows = conn.execute("SELECT * FROM hoplab_fleet_schedules ORDER BY name").fetchall()
    return [_row(r, secret) for r in rows]


def remove(conn: Conn, name: str) -> None:
    """Remove schedule `name` (its firings and alerts stay, as history); UsageError if
    there is none, naming those there are."""
    with conn.transaction():
        gone = conn.execute("DELETE FROM hoplab_fleet_schedules WHERE name = %s RETURNING name",
                            (name,)).fetchone()
    if gone is None:
        names = [s.name for s in schedules(conn)]
        raise UsageError(f"no schedule {name!r} (there are: {', '.join(names) or 'none'})")
