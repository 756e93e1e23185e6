"""`hoplab trend METRIC`: a metric across versions (or any key), with every change point."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hoplab import kv
from hoplab.cli import store_arg
from hoplab.errors import UsageError
from hoplab.render.plot_kinds import FORMATS

if TYPE_CHECKING:
    from hoplab.analysis.series_trend import TrendPoint
    from hoplab.analysis.trend import Trend

_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")
_FORMATS = (*FORMATS, ".html")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "trend", help="a metric across versions, with every change point",
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
                   metavar="KEY=VALUE", help="only runs with this column, label or variant "
                                             "value (repeatable)")
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
    filters = kv.parse(args.filters, "--filter", "test=bulk")
    from hoplab.analysis.series_trend import order_points, trend_points
    from hoplab.analysis.trend import analyse

    with store_arg.reading(args) as store:
        points = trend_points(store, args.metric, filters, args.by,
                              order="natural" if repo else order)
        desc = store.describe()
    if not points:
        shown = " ".join(f"{k}={v}" for k, v in filters.items())
        raise UsageError(f"no finished run in {desc}{' with ' + shown if shown else ''} has "
                         f"both {args.metric} and {args.by}")
    if repo is not None:
        points = order_points(points, "sequence", _git_sequence(repo, points), args.by)
    tests = sorted({t for p in points for t in p.tests})
    if len(tests) > 1:
        # One series should be one measurement; the user may mean it, so warn only.
        print(f"hoplab: warning: the runs are of {len(tests)} tests ({', '.join(tests[:5])}"
              f"{' ...' if len(tests) > 5 else ''}); add --filter test=... to follow one",
              file=sys.stderr)
    found = analyse(args.metric, args.by, points)
    if args.output is not None and args.output.suffix.lower() == ".html":
        from hoplab.render.trend_html import trend_page

        _write(args.output, trend_page(found, desc))
    elif args.output is not None:
        from hoplab.render.plots import save
        from hoplab.render.plots_trend import trend_figure

        save(trend_figure(found), args.output)
    if args.json:
        from hoplab.analysis.trend import to_json
        from hoplab.jsonsafe import json_safe

        json.dump(json_safe(to_json(found)), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        _print(found, desc, order)
    if args.output is not None and not args.json:
        print(f"drawn: {args.output}")
    return 0


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


def _print(found: Trend, desc: str, order: str) -> None:
    from hoplab.analysis.trend import power_note, shown
    from hoplab.render.units import figure

    name = found.metric.split("@", 1)[0]
    runs = sum(len(p.values) for p in found.points)
    cv = found.detection.cv
    noise = f"; noise {cv * 100:.1f} % per repetition" if cv == cv else ""
    values = len(found.points)
    print(f"{found.metric} by {found.by} in {desc}: {values} value{'s' * (values != 1)}, "
          f"{runs} run{'s' * (runs != 1)}, {order} order{noise}")
    if not found.changes:
        print("no change point")
    else:
        print(f"{len(found.changes)} change point{'s' * (len(found.changes) != 1)}:")
        wheres = [f"{shown(c.before, found.by)} -> {shown(c.after, found.by)}"
                  for c in found.changes]
        width = max(map(len, wheres))
        for c, where in zip(found.changes, wheres, strict=True):
            cp = c.point
            print(f"  {where:<{width}}  {figure(cp.median_before, name)} -> "
                  f"{figure(cp.median_after, name)}  {cp.change_pct:+.1f} % "
                  f"[{cp.ci_pct[0]:+.1f}, {cp.ci_pct[1]:+.1f}]  p {cp.p:.2g}")
    note = power_note(found)
    if note:
        print(note)
