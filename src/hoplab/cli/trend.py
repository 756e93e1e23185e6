"""`hoplab trend METRIC`: a metric across versions (or any key), with every change point."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hoplab.cli import store_arg
from hoplab.errors import UsageError
from hoplab.jsonsafe import json_safe
from hoplab.render.plot_kinds import FORMATS

if TYPE_CHECKING:
    from hoplab.analysis.series_trend import TrendPoint, TrendSeries
    from hoplab.analysis.trend import Trend
    from hoplab.store import Store

_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")
_FORMATS = (*FORMATS, ".html")


class _HelpWithDetectors(argparse.HelpFormatter):
    """`trend --help`: the --detector line lists the registered detectors, read from their
    registry (hoplab.analysis.detectors) only when the help is printed, so that parsing a
    trend's arguments imports no analysis."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if action.dest != "detector" or text is None:
            return text
        from hoplab.analysis import detectors

        listed = "; ".join(
            f"{name}{' (the default)' if name == detectors.DEFAULT else ''}: "
            f"{detectors.get(name).summary}" for name in detectors.names())
        return f"{text}: {listed}".replace("%", "%%")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "trend", help="a metric across versions, with every change point",
        formatter_class=_HelpWithDetectors,
        description="A metric across the values of KEY (default version), every repetition "
                    "of every value used: where it changed (between which two values), the "
                    "medians before and after, the change with its 95 % bootstrap interval, "
                    "and p. See docs/trend.md.")
    p.add_argument("metric", metavar="METRIC",
                   help="a whole-run metric (goodput), NAME@FLOW or NAME@node=N,key=K")
    p.add_argument("--by", default="version", metavar="KEY",
                   help="label, variant key or column the values are of (default version)")
    p.add_argument("--order", default="natural", metavar="natural|time|git:REPO",
                   help="natural (v1.9 before v1.10, the default), time (each value's "
                        "first run), or git:REPO (first-parent order of the commits the "
                        "values name)")
    p.add_argument("--filter", dest="filters", action="append", default=[],
                   metavar="KEY=VALUE[,KEY=VALUE]",
                   help="only runs with this column, label or variant value; a comma, or "
                        "a repeated --filter, joins conditions that must all hold")
    p.add_argument("--detector", metavar="NAME",
                   help="what places the change points (docs/trend.md compares them), one "
                        "of the registered detectors")
    p.add_argument("--json", action="store_true", help="the trend as JSON on stdout")
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help=f"also draw it: FILE{', FILE'.join(_FORMATS)} (an interactive "
                        "page)")
    store_arg.add(p)
    p.set_defaults(func=run_trend)


def run_trend(args: argparse.Namespace) -> int:
    if args.output is not None and args.output.suffix.lower() not in _FORMATS:
        raise UsageError(f"{args.output}: the file must end in {', '.join(_FORMATS)}")
    order = args.order
    repo = None
    if order.startswith("git:"):
        repo = Path(order[4:])
        if not repo.is_dir():
            raise UsageError(f"--order {order}: {repo} is not a directory")
    elif order not in ("natural", "time"):
        raise UsageError(f"--order {order!r}: natural, time or git:REPO")
    from hoplab.analysis import detectors, select
    from hoplab.analysis.series_trend import order_points, trend_series
    from hoplab.analysis.trend import analyse

    filters = select.conditions(args.filters)
    detector = detectors.get(args.detector or detectors.DEFAULT).name   # unknown: exit 2
    with store_arg.reading(args) as store:
        series = trend_series(store, args.metric, filters, args.by,
                              order="natural" if repo else order)
        desc = store.describe()
        if not series:
            _why_none(store, args.metric, filters, args.by)
    if args.output is not None and len(series) > 1:
        raise UsageError(f"{args.output}: the runs are {len(series)} series (" +
                         ", ".join(s.label for s in series[:5]) + "); draw one: add "
                         f"--filter {series[0].label.split()[0]}")
    if repo is not None:
        sequence = _git_sequence(repo, [p for s in series for p in s.points])
        series = [dataclasses.replace(s, points=order_points(s.points, "sequence", sequence,
                                                             args.by)) for s in series]
    _warn_tests(series)
    found = [analyse(args.metric, args.by, s.points, detector=detector, title=s.label)
             for s in series]
    if args.output is not None:
        _draw(found[0], args.output, desc)
    if args.json:
        json.dump(json_safe(_json(found, series)), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        _print(found, series, desc, order)
    if args.output is not None and not args.json:
        print(f"drawn: {args.output}")
    return 0


def _why_none(store: Store, metric: str, filters: dict[str, str], by: str) -> NoReturn:
    """UsageError saying why no run gave a point: a filter no run meets (listing the
    keys or values there are), a metric they lack (listing theirs), or the key."""
    from hoplab import metrics
    from hoplab.analysis import select
    from hoplab.analysis.compare import parse_metric

    select.check(store, filters)
    shown = " ".join(f"{k}={v}" for k, v in filters.items())
    metrics.require(parse_metric(metric).name,
                    store.metric_names({"status": "ok", **filters}), "METRIC")
    raise UsageError(f"no finished run in {store.describe()}"
                     f"{' with ' + shown if shown else ''} has both {metric} and {by}")


def _draw(found: Trend, output: Path, desc: str) -> None:
    if output.suffix.lower() == ".html":
        from hoplab.render.trend_html import trend_page

        _write(output, trend_page(found, desc))
    else:
        from hoplab.render.plots import save
        from hoplab.render.plots_trend import trend_figure

        save(trend_figure(found), output)


def _warn_tests(series: list[TrendSeries]) -> None:
    tests = sorted({t for s in series for p in s.points for t in p.tests})
    if len(tests) > 1:
        # One series should be one measurement; the user may mean it, so warn only.
        print(f"hoplab: warning: the runs are of {len(tests)} tests ({', '.join(tests[:5])}"
              f"{' ...' if len(tests) > 5 else ''}); add --filter test=... to follow one",
              file=sys.stderr)


def _json(found: list[Trend], series: list[TrendSeries]) -> dict[str, Any]:
    """One series: its document (analysis/trend.py to_json) and its `variant` ({});
    several: `metric` and `series`, one such document each, and no `points` at the top,
    so that no reader takes one series for all of them."""
    from hoplab.analysis.trend import to_json

    docs = [{**to_json(f), "variant": s.variant} for f, s in zip(found, series, strict=True)]
    return docs[0] if len(docs) == 1 else {"metric": found[0].metric, "series": docs}


def _write(path: Path, text: str) -> None:
    """Write text whole or not at all: a page cut short by a full disk or Ctrl-C is not
    left where the old one was."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _git(repo: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True,
                          check=False)


def _git_sequence(repo: Path, points: list[TrendPoint]) -> list[str]:
    """The values' texts, oldest commit first along HEAD's first parents. A value names
    a commit by a SHA or its prefix, else by anything git rev-parse takes (a tag)."""
    proc = _git(repo, "rev-list", "--first-parent", "--reverse", "HEAD")
    if proc.returncode != 0:
        raise UsageError(f"--order git:{repo}: git rev-list: {proc.stderr.strip()}")
    shas = proc.stdout.split()
    place = {sha: i for i, sha in enumerate(shas)}
    ranked: list[tuple[int, str]] = []
    missing = []
    for p in points:
        text = str(p.value)
        hits = [s for s in shas if s.startswith(text.lower())] if _HEX.match(text) else []
        if len(hits) != 1:
            proc = _git(repo, "rev-parse", "--verify", "-q", f"{text}^{{commit}}")
            hits = [proc.stdout.strip()] if proc.returncode == 0 else []
        if hits and hits[0] in place:
            ranked.append((place[hits[0]], text))
        else:
            missing.append(text)
    if missing:
        raise UsageError(
            f"--order git:{repo}: {len(missing)} value(s) name no commit on HEAD's first-"
            f"parent line: {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
    return [text for _, text in sorted(ranked)]


def _print(found: list[Trend], series: list[TrendSeries], desc: str, order: str) -> None:
    runs = sum(len(p.values) for t in found for p in t.points)
    head = found[0]
    if len(found) > 1:
        keys = ", ".join(series[0].variant)
        print(f"{head.metric} by {head.by} in {desc}: {len(found)} series, {runs} runs, "
              f"{order} order; the runs differ in {keys} too, so each is followed apart")
    for t in found:
        if len(found) > 1:
            print()
        _print_one(t, "" if len(found) > 1 else f" in {desc}", order)


def _print_one(found: Trend, where: str, order: str) -> None:
    from hoplab.analysis import detectors
    from hoplab.analysis.trend import cannot_tell, power_note, shown
    from hoplab.render.units import figure

    name = found.metric.split("@", 1)[0]
    runs = sum(len(p.values) for p in found.points)
    cv = found.detection.cv
    noise = f"; noise {cv * 100:.1f} % per repetition" if cv == cv else ""
    detector = "" if found.detection.detector == detectors.DEFAULT else \
        f", detector {found.detection.detector}"
    values = len(found.points)
    title = f"{found.title}: " if found.title else ""
    print(f"{title}{found.metric} by {found.by}{where}: {values} value{'s' * (values != 1)}, "
          f"{runs} run{'s' * (runs != 1)}, {order} order{detector}{noise}")
    untold = cannot_tell(found)
    if untold:
        print(untold)
    elif not found.changes:
        print("no change point")
    else:
        print(f"{len(found.changes)} change point{'s' * (len(found.changes) != 1)}:")
        wheres = [f"{shown(c.before, found.by)} -> {shown(c.after, found.by)}"
                  for c in found.changes]
        width = max(map(len, wheres))
        for c, where_ in zip(found.changes, wheres, strict=True):
            cp = c.point
            print(f"  {where_:<{width}}  {figure(cp.median_before, name)} -> "
                  f"{figure(cp.median_after, name)}  {cp.change_pct:+.1f} % "
                  f"[{cp.ci_pct[0]:+.1f}, {cp.ci_pct[1]:+.1f}]  p {cp.p:.2g}")
    note = power_note(found)
    if note:
        print(note)
