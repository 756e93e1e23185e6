"""The dashboard's fleet page: the benches, the jobs by state, each experiment's progress,
the failures (of runs and of bisections' commit jobs), the jobs handed on from a silent
bench, the late runs kept as superseded, who waits for which device, and the latest
alerts. fleet/queue/status.py (which `hoplab fleet` prints) and fleet/schedule/alerts.py
decide what they are; this only renders."""

from __future__ import annotations

import time
from collections.abc import Sequence

from hoplab import kv
from hoplab.fleet.queue.status import FleetStatus
from hoplab.fleet.schedule.alerts import Alert
from hoplab.render.html import Html, esc, table
from hoplab.web.pages import dashboard_page

_STATE = {"idle": "better", "busy": "", "draining": "", "stopped": "note", "gone": "worse"}


def _ago(then: float, now: float) -> str:
    s = max(0.0, now - then)
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 \
        else f"{s / 3600:.1f} h ago"


def _benches(status: FleetStatus, now: float) -> Html:
    if not status.benches:
        return Html('<p class="note">No bench has joined (hoplab worker --bench NAME).</p>')
    rows = [(b.name, kv.pairs(b.labels) or "-", b.machine,
             Html(f'<span class="{_STATE.get(b.state, "")}">{esc(b.state)}</span>'),
             _ago(b.last_heartbeat, now), "-" if b.current_job is None else b.current_job)
            for b in status.benches]
    return table(("bench", "labels", "machine", "state", "last heartbeat", "job"), rows,
                 cls="cards")


def _experiments(status: FleetStatus) -> Html:
    if not status.experiments:
        return Html('<p class="note">Nothing submitted (hoplab submit EXPERIMENT.toml).</p>')
    rows = []
    for e in status.experiments:
        done = e.states.get("succeeded", 0) + e.states.get("failed", 0)
        runs = Html(f'<a href="/runs?experiment_id={esc(e.id)}">{esc(e.id)}</a>')
        rows.append((runs, e.name, time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.submitted_at)),
                     f"{done} / {e.jobs}", ", ".join(f"{k} {v}" for k, v in
                                                    sorted(e.states.items())),
                     "cancelled" if e.cancelled else "finished" if e.finished else "running"))
    return table(("experiment", "name", "submitted (UTC)", "done", "jobs", "state"), rows,
                 cls="cards")


def _failures(status: FleetStatus) -> Html:
    if not status.failures:
        return Html("")
    rows = [(f.experiment_id, f.job_id, f.bench or "-",
             Html(f'<a href="/run/{f.run_id}">{f.run_id}</a>') if f.run_id else "-", f.error)
            for f in status.failures]
    return Html("<h2>failures</h2>" + table(("experiment", "job", "bench", "run", "error"),
                                            rows, cls="cards"))


def _bisection_failures(status: FleetStatus) -> Html:
    if not status.bisection_failures:
        return Html("")
    rows = [(f.bisection, f.job_id, Html(f"<code>{esc(f.commit[:12])}</code>"),
             f.bench or "-", f.error) for f in status.bisection_failures]
    return Html("<h2>failed bisection jobs</h2>"
                + table(("bisection", "job", "commit", "bench", "error"), rows, cls="cards"))


def _handovers(status: FleetStatus, now: float) -> Html:
    if not status.handovers:
        return Html("")
    rows = [(h.job_id, h.task, h.bench or "?", h.by_bench, _ago(h.at, now), h.attempt + 1)
            for h in status.handovers]
    return Html('<h2>jobs handed on</h2><p class="note">Put back in the queue because '
                "their bench went silent.</p>"
                + table(("job", "task", "silent bench", "put back by", "when", "attempt"),
                        rows, cls="cards"))


def _superseded(status: FleetStatus, now: float) -> Html:
    if not status.superseded:
        return Html("")
    rows = [(Html(f'<a href="/run/{r.run_id}">{r.run_id}</a>'), r.job_id, r.bench,
             _ago(r.at, now)) for r in status.superseded]
    return Html('<h2>superseded runs</h2><p class="note">Stored by a bench after its job '
                "was handed on: kept, never counted.</p>"
                + table(("run", "job", "bench", "stored"), rows, cls="cards"))


def _device_waits(status: FleetStatus, now: float) -> Html:
    if not status.device_waits:
        return Html("")
    rows = []
    for w in status.device_waits:
        held = "nobody now" if w.held_by is None else (
            f"bench {w.held_by}" + (f" (job {w.held_job})" if w.held_job is not None else ""))
        rows.append((w.device, "-" if w.job_id is None else w.job_id, w.bench,
                     _ago(w.since, now), held,
                     "-" if w.held_since is None else _ago(w.held_since, now)))
    return Html("<h2>waiting for a device</h2>"
                + table(("device", "job", "bench", "waiting since", "held by", "held since"),
                        rows, cls="cards"))


def _events(status: FleetStatus, now: float) -> Html:
    """What `hoplab fleet` lists after its tables, in the same order."""
    return Html(_bisection_failures(status) + _handovers(status, now)
                + _superseded(status, now) + _device_waits(status, now))


def _alerts(found: Sequence[Alert]) -> Html:
    if not found:
        return Html("")
    rows = [(a.created_at.strftime("%Y-%m-%d %H:%M"), a.schedule, a.kind, a.state,
             a.text.splitlines()[0] if a.text else "") for a in found]
    return Html('<h2>latest alerts <a href="/alerts">(all)</a></h2>'
                + table(("created (UTC)", "schedule", "kind", "state", "what"), rows,
                        cls="cards"))


def fleet_page(status: FleetStatus | None, alerts: Sequence[Alert], store: str,
               now: float | None = None) -> str:
    """None: this store has no fleet (SQLite, or no bench ever joined)."""
    if status is None:
        body = ('<p class="note">No fleet in this store: benches and their queue live in a '
                "PostgreSQL store (hoplab worker, hoplab submit; docs/fleet.md).</p>")
    else:
        jobs = ", ".join(f"{k} {v}" for k, v in sorted(status.jobs.items())) or "none"
        now = now or time.time()
        body = (f"<h2>benches</h2>{_benches(status, now)}"
                f"<h2>jobs</h2><p>{esc(jobs)}</p>"
                f"<h2>experiments</h2>{_experiments(status)}{_failures(status)}"
                f"{_events(status, now)}{_alerts(alerts)}")
    return dashboard_page("fleet", body, store)
