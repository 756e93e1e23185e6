"""The dashboard's list of the schedules' alerts (fleet/schedule/alerts.py list_alerts decides
what they are; this only renders). Each change links to its comparison."""

from __future__ import annotations

from collections.abc import Sequence

from hoplab.fleet.schedule.alerts import Alert
from hoplab.render.html import Html, esc, table
from hoplab.web.pages import dashboard_page

_STATE = {"sent": "better", "failed": "worse"}


def _what(a: Alert) -> Html:
    lines = [esc(line) for line in a.text.splitlines() if not line.startswith(("http", "/"))]
    links = [f'<a href="{esc(c["url"])}">{esc(c["metric"])} {esc(c["test"])}: compare</a>'
             for c in a.payload.get("changes", []) if isinstance(c, dict) and "url" in c]
    return Html("<br>".join([*lines, *links]))


def alerts_page(found: Sequence[Alert] | None, store: str) -> str:
    """The alerts, the newest first; None: the store cannot hold any (SQLite)."""
    if found is None:
        body = ('<p class="note">Schedules and their alerts live in the fleet\'s PostgreSQL '
                "store (docs/schedules.md); this store is SQLite.</p>")
    elif not found:
        body = '<p class="note">No alerts (hoplab schedule add ... --alert URL).</p>'
    else:
        rows = [(a.id, a.created_at.strftime("%Y-%m-%d %H:%M"), a.schedule, a.kind,
                 Html(f'<span class="{_STATE.get(a.state, "")}">{esc(a.state)}</span>'
                      + (f"<br>{a.attempts} attempts" if a.attempts > 1 else "")
                      + (f'<br><span class="note">{esc(a.last_error)}</span>'
                         if a.last_error and a.state != "sent" else "")),
                 _what(a)) for a in found]
        body = table(("id", "created (UTC)", "schedule", "kind", "state", "what"), rows,
                     numeric=(0,), cls="cards")
    return dashboard_page("alerts", body, store)
