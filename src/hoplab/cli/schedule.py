"""`hoplab schedule add|list|remove|alerts`: experiments run on the fleet on a cron
schedule, each firing judged against the one before and an alert POSTed when a figure
got worse (docs/schedules.md). The alert URL is never printed whole."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

from hoplab import kv
from hoplab.cli import store_arg
from hoplab.errors import UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "schedule", help="run an experiment on the fleet on a cron schedule, with alerts",
        description="Schedules on the fleet's PostgreSQL store (docs/schedules.md): each "
                    "firing submits the experiment as packed at `schedule add`, its runs "
                    "labelled schedule=NAME; when they have finished, every figure is "
                    "compared with the previous firing and a JSON alert is POSTed to "
                    "--alert URL when one got worse, a run failed or a bench is gone.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser("add", help="add (or replace) a schedule",
                           epilog='example: hoplab schedule add nightly nat.toml --cron '
                                  '"0 2 * * *" --tz Europe/Paris --where device=erx '
                                  "--alert https://hooks.slack.com/services/...")
    add.add_argument("name", metavar="NAME")
    add.add_argument("experiment", metavar="EXPERIMENT.toml")
    add.add_argument("--cron", required=True,
                     help='when: a 5-field cron expression, e.g. "0 2 * * *" (02:00 daily)')
    add.add_argument("--tz", default="UTC",
                     help="the time zone the cron times are in (default UTC)")
    add.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                     help="only benches with this label take its runs (repeatable)")
    add.add_argument("--bench", action="append", default=[], metavar="NAME",
                     help="only these benches take its runs (repeatable)")
    alert = add.add_mutually_exclusive_group()
    alert.add_argument("--alert", metavar="URL",
                       help="POST alerts here as JSON (a Slack webhook, say); a secret: "
                            "stored, never shown whole")
    alert.add_argument("--alert-file", metavar="FILE",
                       help="the alert URL read from FILE's first line instead, so that it "
                            "is in no command line or shell history")
    add.add_argument("--alert-link-local", action="store_true",
                     help="allow an alert URL whose host is, or resolves to, a link-local "
                          "or cloud metadata address (refused otherwise: "
                          "docs/schedules.md)")
    add.add_argument("--dashboard-url", metavar="URL",
                     help="the team's `hoplab serve` address: alerts link to its "
                          "comparison of the runs (relative links otherwise)")
    lst = verbs.add_parser("list", help="list the schedules (alert URLs redacted)")
    lst.add_argument("--json", action="store_true")
    rm = verbs.add_parser("remove", help="remove a schedule (its runs and alerts stay)")
    rm.add_argument("name", metavar="NAME")
    al = verbs.add_parser("alerts", help="list the alerts, the newest first")
    al.add_argument("--schedule", metavar="NAME", help="of this schedule only")
    al.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    al.add_argument("--json", action="store_true")
    verbs.add_parser(
        "serve", help="fire the schedules and send their alerts, every minute, until "
                      "stopped",
        description="Run the schedules' minute tick (a procrastinate periodic task on the "
                    "fleet's queue, in a queue of its own): submit what is due, judge "
                    "the firings that have finished, alert on benches gone, send the "
                    "alerts. Run one (or several: each minute is ticked once) on any "
                    "machine that reaches the store, e.g. as a systemd unit beside a "
                    "bench's worker.")
    for q in (add, lst, rm, al, verbs.choices["serve"]):
        store_arg.add(q)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    verb = {"add": _add, "list": _list, "remove": _remove, "alerts": _alerts,
            "serve": _serve}[args.verb]
    return verb(args)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _add(args: argparse.Namespace) -> int:
    from pathlib import Path

    from psycopg.rows import dict_row

    import hoplab.kinds  # noqa: F401  (the registry's built-in kinds, for the loader)
    from hoplab.fleet.queue.db import connect, conninfo
    from hoplab.fleet.queue.submit import pack
    from hoplab.fleet.schedule import schedules
    from hoplab.fleet.schedule.tables import SCHEDULES
    from hoplab.spec.experiment_loader import load_experiment

    name = schedules.check_name(args.name)
    cron = schedules.check_cron(args.cron)
    tz = schedules.check_tz(args.tz)
    given = _alert_url(args)
    alert = None if given is None else schedules.check_alert(
        given, link_local=args.alert_link_local)
    where = dict(kv.split(w, "--where", "--where device=erx") for w in args.where)
    if args.dashboard_url is not None and not args.dashboard_url.startswith(
            ("http://", "https://")):
        raise UsageError(f"--dashboard-url {args.dashboard_url!r}: give an http:// or "
                         "https:// address")
    url = store_arg.url(args)
    conninfo(url)                       # a SQLite store is refused before any work
    experiment = load_experiment(args.experiment)      # file, line and key; exit 2
    # The files as they are now, content-addressed in the store: what every firing runs.
    bundle = pack(url, Path(args.experiment))
    now = _now()
    with connect(url, tables=[SCHEDULES], row_factory=dict_row) as conn:
        replaced = schedules.save(
            conn, name=name, cron=cron, tz=tz, experiment=experiment.name,
            source=args.experiment, bundle=bundle, benches=args.bench, where=where,
            alert=alert, dashboard_url=args.dashboard_url, now=now,
            alert_link_local=args.alert_link_local)
        added = next(s for s in schedules.schedules(conn) if s.name == name)
    print(f"schedule {name} {'replaced' if replaced else 'added'}: {experiment.name} at "
          f'"{cron}" {tz}, next {added.next(now):%Y-%m-%d %H:%M} UTC; alerts to '
          f"{added.alert or 'nowhere (no --alert)'}")
    return 0


def _alert_url(args: argparse.Namespace) -> str | None:
    if args.alert_file is None:
        return args.alert if args.alert is None else str(args.alert)
    try:
        with open(args.alert_file, encoding="utf-8") as f:
            line = f.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--alert-file {args.alert_file}: cannot read it "
                         f"({type(exc).__name__})") from None
    if not line:
        raise UsageError(f"--alert-file {args.alert_file}: its first line is empty")
    return line


def _list(args: argparse.Namespace) -> int:
    from psycopg.rows import dict_row

    from hoplab.fleet.queue.db import connect
    from hoplab.fleet.schedule.schedules import ScheduleError, schedules
    from hoplab.fleet.schedule.tables import SCHEDULES

    now = _now()
    with connect(store_arg.url(args), tables=[SCHEDULES], row_factory=dict_row) as conn:
        found = schedules(conn)
    if args.json:
        listed = [s.as_json(now) for s in found]
        json.dump(listed, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 1 if any(s["error"] for s in listed) else 0
    if not found:
        print("no schedules")
    broken = []
    for s in found:
        where = " ".join([*(f"--bench {b}" for b in s.benches),
                          *(f"--where {k}={v}" for k, v in s.where.items())])
        try:
            upcoming = f"{s.next(now):%Y-%m-%d %H:%M} UTC"
        except ScheduleError as e:   # listed and reported; the others still are
            upcoming = "never (see below)"
            broken.append(f"schedule {s.name}: {e}")
        print(f"{s.name}  {s.experiment} ({s.source})  \"{s.cron}\" {s.tz}  next "
              f"{upcoming}  alert {s.alert or '-'}" + (f"  {where}" if where else ""))
    for line in broken:
        print(f"hoplab: {line} (skipped by every tick; replace it with schedule add)",
              file=sys.stderr)
    return 1 if broken else 0


def _remove(args: argparse.Namespace) -> int:
    from psycopg.rows import dict_row

    from hoplab.fleet.queue.db import connect
    from hoplab.fleet.schedule.schedules import remove
    from hoplab.fleet.schedule.tables import SCHEDULES

    with connect(store_arg.url(args), tables=[SCHEDULES], row_factory=dict_row) as conn:
        remove(conn, args.name)
    print(f"schedule {args.name} removed (its runs and alerts stay)")
    return 0


def _alerts(args: argparse.Namespace) -> int:
    from hoplab.fleet.schedule.alerts import list_alerts

    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: give 1 or more")
    found = list_alerts(store_arg.url(args), limit=args.limit, schedule=args.schedule)
    if args.json:
        json.dump([a.as_json() for a in found], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not found:
        print("no alerts")
    for a in found:
        tried = f", {a.attempts} attempt{'s' * (a.attempts != 1)}" if a.attempts else ""
        error = f" ({a.last_error})" if a.last_error and a.state != "sent" else ""
        print(f"{a.id}  {a.created_at:%Y-%m-%d %H:%M}  {a.state}{tried}{error}")
        for line in a.text.splitlines():
            print(f"    {line}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from hoplab.fleet.queue.db import conninfo
    from hoplab.fleet.schedule.tasks import serve

    store_arg.no_password_in_argv(args, "schedule serve")
    url = store_arg.url(args)
    conninfo(url)                       # a SQLite store is refused (exit 2)
    print("hoplab: ticking the schedules every minute (Ctrl-C stops)", file=sys.stderr)
    serve(url)
    return 0
