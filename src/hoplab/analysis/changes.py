"""What changed in a store: the dashboard's home (issue 21).

Every series the store holds: the finished runs of one experiment and test, one variant
and one set of labels (device=..., firmware=...), along the label that orders them:
`version` (in natural order), else `commit` (in time order: the store knows no git
history), else, for a series run again and again, each invocation of the experiment
(`experiment_id`, in time order; each run at its start time when it names none). For
every headline figure of its test kind (the caller says which: kinds.HEADLINES), two
questions, each answered by the one analysis that answers it elsewhere:

- its latest change point: analysis/trend.py analyse with the default detector, on the
  same points `hoplab trend METRIC --by KEY` reads (series_trend's TrendPoint and
  order), so the home shows what `hoplab trend` says;
- its latest runs against their baseline: the value pinned with `hoplab baseline` (its
  runs when pinned, those still stored), else the value before them in the series'
  order: analysis/groups.py compare_groups, as `hoplab compare` judges them.

Each change is worse or better by the metric's direction (the metric registry), and
they are listed in the one order of changes, analysis/verdicts.py rank: the largest
regression first, then the improvements. A series where neither finds anything is
steady; one too short for either (fewer than 4 values, and too few runs on its latest
two for the rank test to reach its level) cannot tell.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hoplab import metrics as registry
from hoplab.analysis import verdicts
from hoplab.analysis.changepoints import MIN_SIZE
from hoplab.analysis.detectors import DEFAULT
from hoplab.analysis.groups import compare_groups
from hoplab.analysis.order import natural_key
from hoplab.analysis.ranks import min_p
from hoplab.analysis.series_trend import TrendPoint, order_points
from hoplab.analysis.trend import analyse
from hoplab.errors import UsageError
from hoplab.store import Annotation, Baseline, Kept, RunSummary, Store

ORDER_LABELS = ("version", "commit")     # labels a series is ordered by, in this preference
TIME = ("experiment_id", "started_at")   # else by time: each invocation of the experiment,
                                         # or each run when it names none (imported)
ALPHA = 0.05
# Raise when what a kept judgement holds, or how a series is judged, changes: what was
# kept by an older hoplab is then judged again rather than read.
KEEP_VERSION = 1


@dataclass(frozen=True)
class Series:
    experiment: str
    test: str
    kind: str
    by: str                                  # version, commit, experiment_id, started_at
    variant: tuple[tuple[str, str], ...]     # every variant key, as text
    labels: tuple[tuple[str, str], ...]      # every label but `by`

    @property
    def order(self) -> str:
        """How `hoplab trend --order` orders it: natural for versions and start times
        (numbers), else time."""
        return "natural" if self.by in ("version", "started_at") else "time"

    @property
    def title(self) -> str:
        """"nat / nat-bulk hops=2 device=wrt3200"."""
        rest = " ".join(f"{k}={v}" for k, v in (*self.variant, *self.labels))
        return f"{self.experiment} / {self.test}" + (f" {rest}" if rest else "")

    def filters(self) -> dict[str, str]:
        """The selection of its runs, as `hoplab trend --filter` and compare take it."""
        return {"experiment": self.experiment, "test": self.test, **dict(self.variant),
                **dict(self.labels)}

    def key(self) -> str:
        """The series as the store keeps it beside a baseline (JSON text)."""
        return json.dumps([self.experiment, self.test, self.kind, self.by,
                           [list(p) for p in self.variant], [list(p) for p in self.labels]])

    @staticmethod
    def of_key(text: str) -> Series:
        experiment, test, kind, by, variant, labels = json.loads(text)
        return Series(experiment=experiment, test=test, kind=kind, by=by,
                      variant=tuple((str(k), str(v)) for k, v in variant),
                      labels=tuple((str(k), str(v)) for k, v in labels))


@dataclass(frozen=True)
class Pin:
    """A series' pinned baseline (`hoplab baseline`): the value of its order and the
    runs it had when pinned."""

    id: int
    value: str | float
    runs: frozenset[int]


def pins_of(baselines: Iterable[Baseline]) -> dict[Series, Pin]:
    """The store's baselines by series."""
    return {Series.of_key(b.series): Pin(b.id, json.loads(b.value), frozenset(b.runs))
            for b in baselines}


@dataclass(frozen=True)
class Change:
    series: Series
    metric: str
    source: str                              # "step": its latest change point; "latest":
                                             # its latest runs against the value before;
                                             # "baseline": against the pinned baseline
    before: str | float                      # the values of `by` on both sides
    after: str | float
    median_before: float
    median_after: float
    change_pct: float
    ci_pct: tuple[float, float]              # 95 % interval of the change
    p: float | None
    verdict: str                             # worse or better (n/a: no direction)
    runs_before: tuple[int, ...]             # the runs of the values `before` and `after`
    runs_after: tuple[int, ...]
    n_before: int                            # what the figures rest on: repetitions of
    n_after: int                             # the stretches (step), runs (latest)
    experiment_file: str | None = None       # as its runs stored it: what bisect runs
    started_before: float = math.nan         # when the values `before` and `after` were
    started_after: float = math.nan          # first measured (annotations between them)


@dataclass(frozen=True)
class WhatChanged:
    changes: tuple[Change, ...]              # in analysis/verdicts.py rank order
    steady: tuple[Series, ...]               # judged, and no change found
    cannot_tell: int                         # series too short for either question
    series: int                              # every series
    runs: int                                # every finished run read
    state: tuple[int, int]                   # the store's (highest id, runs) it is of
    baselines: tuple[int, ...] = ()          # and the ids of the baselines pinned then


def _text(value: object) -> str:
    """A variant value as filters and `hoplab trend` spell it (true, 2, "x" as x)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value) if isinstance(value, int) else json.dumps(value)


def series_of(run: RunSummary) -> Series:
    by = next((k for k in ORDER_LABELS if k in run.labels),
              TIME[0] if run.experiment_id else TIME[1])
    return Series(experiment=run.experiment, test=run.test, kind=run.kind, by=by,
                  variant=tuple(sorted((k, _text(v)) for k, v in run.variant.items())),
                  labels=tuple(sorted((k, str(v)) for k, v in run.labels.items() if k != by)))


def x_of(run: RunSummary, by: str) -> str | float:
    """The run's value of `by`, as series_trend reads it for `hoplab trend --by`."""
    if by in TIME:
        return run.started_at if by == "started_at" else str(run.experiment_id)
    return str(run.labels[by])


def points(series: Series, runs: Sequence[RunSummary], metric: str) -> list[TrendPoint]:
    """The series' points of `metric`, as series_trend.trend_points makes them: each value
    of `by` with every run that has a finite figure, in the series' order."""
    grouped: dict[str | float, list[RunSummary]] = {}
    for r in runs:
        value = r.metrics.get(metric)
        if value is not None and math.isfinite(value):
            grouped.setdefault(x_of(r, series.by), []).append(r)
    found = [TrendPoint(value=x, runs=tuple(r.id for r in rs),
                        values=tuple(r.metrics[metric] for r in rs),
                        started_at=min(r.started_at for r in rs),
                        tests=frozenset({f"{series.experiment}/{series.test}"}))
             for x, rs in grouped.items()]
    return order_points(found, series.order, by=series.by)


def direction(metric: str, change_pct: float) -> str:
    """worse or better, by the metric's direction in the registry; n/a without one."""
    better = registry.better(metric)
    if better is None or not math.isfinite(change_pct) or change_pct == 0:
        return verdicts.NA
    return verdicts.BETTER if (change_pct > 0) == (better == "higher") else verdicts.WORSE


def latest_step(series: Series, metric: str, pts: Sequence[TrendPoint]) -> Change | None:
    """The series' latest change point of `metric`, as `hoplab trend` finds it."""
    if len(pts) < 2 * MIN_SIZE:
        return None
    found = analyse(metric, series.by, pts)
    if not found.changes:
        return None
    last = found.changes[-1]
    cp = last.point
    return Change(series=series, metric=metric, source="step", before=last.before,
                  after=last.after, median_before=cp.median_before,
                  median_after=cp.median_after, change_pct=cp.change_pct, ci_pct=cp.ci_pct,
                  p=cp.p, verdict=direction(metric, cp.change_pct),
                  runs_before=pts[cp.index - 1].runs, runs_after=pts[cp.index].runs,
                  n_before=cp.n_before, n_after=cp.n_after,
                  started_before=pts[cp.index - 1].started_at,
                  started_after=pts[cp.index].started_at)


def comparable(pts: Sequence[TrendPoint], alpha: float = ALPHA) -> bool:
    """Whether the latest two values have runs enough for the rank test to reach alpha
    (else compare_groups could only say not enough data)."""
    return len(pts) >= 2 and min_p(len(pts[-2].runs), len(pts[-1].runs)) <= alpha


def sides(pts: Sequence[TrendPoint], pin: Pin | None = None, alpha: float = ALPHA
          ) -> tuple[TrendPoint, TrendPoint, str] | None:
    """The two values the latest runs are judged between, and how they were chosen: the
    pinned baseline's runs (those with the figure) and the latest value ("baseline"),
    else the latest two values ("latest"); None when the latest value is the baseline
    itself or the runs are too few for the rank test to reach alpha."""
    if pin is not None and pts:
        found = [(r, v, p.started_at) for p in pts for r, v in zip(p.runs, p.values, strict=True)
                 if r in pin.runs]
        if found:
            if pts[-1].value == pin.value:
                return None
            base = TrendPoint(value=pin.value, runs=tuple(r for r, _, _ in found),
                              values=tuple(v for _, v, _ in found),
                              started_at=min(t for _, _, t in found), tests=pts[-1].tests)
            enough = min_p(len(base.runs), len(pts[-1].runs)) <= alpha
            return (base, pts[-1], "baseline") if enough else None
    return (pts[-2], pts[-1], "latest") if comparable(pts, alpha) else None


def latest_changes(series: Series, store: Store, names: Sequence[str],
                   per_metric: dict[str, list[TrendPoint]],
                   per_flow: bool | Callable[[str], bool] = False,
                   pin: Pin | None = None) -> list[Change]:
    """The latest runs of each metric against their baseline (`sides`), judged by
    compare_groups (as `hoplab compare` would, their selections being the two values):
    the metrics it calls worse or better."""
    out = []
    todo: dict[tuple[tuple[int, ...], tuple[int, ...]], list[str]] = {}
    pair: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[TrendPoint, TrendPoint, str]] = {}
    for name in names:
        found = sides(per_metric.get(name, []), pin)
        if found is not None:
            key = (found[0].runs, found[1].runs)
            todo.setdefault(key, []).append(name)
            pair[key] = found
    trials = registry.trial_series()
    for (ids_a, ids_b), wanted in todo.items():
        a = [store.get_run(i, series=trials) for i in ids_a]
        b = [store.get_run(i, series=trials) for i in ids_b]
        try:
            result = compare_groups(a, b, wanted, per_flow=per_flow)
        except UsageError:          # measured differently: nothing to say between them
            continue
        before, after, source = pair[(ids_a, ids_b)]
        for g in result.groups:
            for m in g.metrics:
                if m.verdict not in (verdicts.WORSE, verdicts.BETTER) or m.flow is not None:
                    continue
                out.append(Change(
                    series=series, metric=m.metric, source=source, before=before.value,
                    after=after.value, median_before=m.a_median, median_after=m.b_median,
                    change_pct=m.change_pct, ci_pct=(m.ci_low_pct, m.ci_high_pct),
                    p=m.p_value, verdict=m.verdict, runs_before=g.a_ids, runs_after=g.b_ids,
                    n_before=len(m.a_values), n_after=len(m.b_values),
                    started_before=before.started_at, started_after=after.started_at))
    return out


def _may_judge(runs: Sequence[RunSummary], by: str) -> bool:
    """Whether a series could be judged at all, before reading a figure: 2 x MIN_SIZE
    values for a change point, or 8 runs (the fewest, 4 + 4 or 3 + 5, whose rank test
    reaches p <= 0.05) for its latest two. Exact, not a guess: a run without a figure
    only takes values and runs away."""
    if len(runs) >= 8:
        return True
    return len({x_of(r, by) for r in runs}) >= 2 * MIN_SIZE


def judge_series(series: Series, runs: Sequence[RunSummary], store: Store,
                 names: Sequence[str], pin: Pin | None = None
                 ) -> tuple[Change, ...] | None:
    """The series' changes (as what_changed lists them), its latest runs judged against
    `pin` when it has one; None when it is too short to tell."""
    per_metric = {n: points(series, runs, n) for n in names}
    if not any(len(p) >= 2 * MIN_SIZE or sides(p, pin) is not None
               for p in per_metric.values()):
        return None
    changes = [c for n in names if (c := latest_step(series, n, per_metric[n])) is not None]
    changes += latest_changes(series, store, names, per_metric, pin=pin)
    files: dict[int, str | None] = {}
    for c in changes:
        run = c.runs_after[0]
        if run not in files:
            source = store.get_run(run, series=False).metadata.get("experiment_file")
            files[run] = source if isinstance(source, str) else None
    return tuple(dataclasses.replace(c, experiment_file=files[c.runs_after[0]])
                 for c in changes)


def pinned_changes(store: Store, runs: Sequence[RunSummary],
                   headlines: Mapping[str, Sequence[str]]) -> list[Change]:
    """Of `runs` (a report's), the latest runs of every series with a pinned baseline
    judged against it, as the dashboard's home judges them, in the one order of changes."""
    pins = pins_of(store.baselines())
    groups: dict[Series, list[RunSummary]] = {}
    for r in runs:
        if r.status == "ok":
            groups.setdefault(series_of(r), []).append(r)
    found: list[Change] = []
    for series, members in groups.items():
        pin = pins.get(series)
        if pin is None:
            continue
        names = [n for n in headlines.get(series.kind, ()) if registry.find(n) is not None]
        have = {r.id for r in members}
        # The baseline's runs, when the report does not hold them itself.
        members = [*members, *(r for r in store.runs_with_figures(
            names, filters=series.filters()) if r.id in pin.runs and r.id not in have)]
        per_metric = {n: points(series, members, n) for n in names}
        found += latest_changes(series, store, names, per_metric, pin=pin)
    return sorted(found, key=lambda c: (verdicts.rank(c.verdict, c.change_pct),
                                        natural_key(c.series.title), c.metric))


def judge_key(names: Sequence[str], pin: Pin | None) -> str:
    """What judged a series, as kept beside its changes: a kept judgement is read only by
    an index that would judge alike."""
    return json.dumps([KEEP_VERSION, DEFAULT, ALPHA, list(names), pin.id if pin else 0])


def encode(found: tuple[Change, ...] | None) -> str:
    """A series' judgement (judge_series) as the store keeps it."""
    if found is None:
        return "null"
    return json.dumps([{f.name: getattr(c, f.name) for f in dataclasses.fields(Change)
                        if f.name != "series"} for c in found])


def decode(series: Series, text: str) -> tuple[Change, ...] | None:
    data = json.loads(text)
    if data is None:
        return None
    return tuple(Change(series=series, **{
        **d, "ci_pct": tuple(d["ci_pct"]), "runs_before": tuple(d["runs_before"]),
        "runs_after": tuple(d["runs_after"])}) for d in data)


class ChangeIndex:
    """what_changed of a store, kept: computed whole once, then, when runs have only been
    added since (Store.state), again for the series those runs belong to, read back from
    the store. Judging every series of 100,000 runs takes seconds; answering from the
    index takes milliseconds, and a new run costs what its own series costs (a second
    for 1,000 versions x 3 repetitions, milliseconds for a short one). A series whose
    judgement the store keeps (keep_judged: `hoplab run`, `import`, `baseline` and
    `migrate` keep them) is read, not judged, while its last run and number of runs are
    those judged. With `keep`, what it judges is kept in the store too. Safe to share
    between threads: one refresh at a time."""

    def __init__(self, headlines: Mapping[str, Sequence[str]], keep: bool = False) -> None:
        self.headlines = {k: [n for n in v if registry.find(n) is not None]
                          for k, v in headlines.items()}
        self.keep = keep
        self.computed = 0                    # series judged (not read from the store)
        self._judged: dict[Series, tuple[Change, ...]] = {}
        self._pins: dict[Series, Pin] = {}
        self._kept: dict[str, Kept] = {}
        self._to_keep: dict[str, Kept] = {}
        self._series = 0
        self._runs = 0
        self._found: WhatChanged | None = None
        self._lock = threading.Lock()

    def refresh(self, store: Store) -> WhatChanged:
        """What changed in `store` now."""
        state = store.state()
        pins = pins_of(store.baselines())
        ids = tuple(sorted(p.id for p in pins.values()))
        with self._lock:
            old = self._found
            if old is not None and old.state == state and old.baselines == ids:
                return old
            top, count = old.state if old is not None else (0, 0)
            # Cleared first: a pass that fails half way leaves the next to start over.
            self._found = None
            moved = {s for s in {*pins, *self._pins} if pins.get(s) != self._pins.get(s)}
            self._pins = pins
            self._kept = store.kept_changes()
            if old is not None and state[0] >= top and \
                    store.count_ids(top + 1, state[0]) == state[1] - count:
                self._add(store, top, moved)
            else:               # first, or runs deleted: everything again
                self._all(store)
            self._store_kept(store)
            self._found = self._answer(state, ids)
            return self._found

    def keep_series(self, store: Store, ids: Iterable[int]) -> int:
        """Judge the series the runs `ids` belong to and keep the judgements in the store
        (`keep` or not); how many series were judged."""
        wanted = set(ids)
        with self._lock:
            self._pins = pins_of(store.baselines())
            self._kept = store.kept_changes()
            new = [r for r in store.runs_with_figures((), after=min(wanted, default=1) - 1)
                   if r.id in wanted]
            for series in dict.fromkeys(series_of(r) for r in new):
                members = self._members(store, series)
                if _may_judge(members, series.by):
                    self._judge(store, series, members, force=True)
            done = len(self._to_keep)
            self._store_kept(store, always=True)
            return done

    def _store_kept(self, store: Store, always: bool = False) -> None:
        if (self.keep or always) and self._to_keep:
            store.keep_changes(self._to_keep)
        self._to_keep = {}

    def _names(self, kinds: Iterable[str]) -> set[str]:
        return {n for k in kinds for n in self.headlines.get(k, ())}

    def _members(self, store: Store, series: Series) -> list[RunSummary]:
        return [r for r in store.runs_with_figures(
            self._names([series.kind]), filters=series.filters()) if series_of(r) == series]

    def _all(self, store: Store) -> None:
        runs = store.runs_with_figures(())
        groups: dict[Series, list[RunSummary]] = {}
        for r in runs:
            groups.setdefault(series_of(r), []).append(r)
        wanted = {s: rs for s, rs in groups.items() if _may_judge(rs, s.by)}
        self._judged, self._series, self._runs = {}, len(groups), len(runs)
        # Those the store keeps a valid judgement of are read; the others' figures read.
        todo = {s: rs for s, rs in wanted.items() if not self._read_kept(s, rs)}
        figures = store.figures_of([r.id for rs in todo.values() for r in rs],
                                   self._names({s.kind for s in todo}))
        for series, members in todo.items():
            for r in members:
                r.metrics.update(figures.get(r.id, {}))
            self._judge(store, series, members)

    def _add(self, store: Store, top: int, moved: Iterable[Series] = ()) -> None:
        """Judge again the series with runs above `top` and those whose baseline was
        pinned, moved or removed (`moved`)."""
        new = store.runs_with_figures((), after=top)
        self._runs += len(new)
        for series in dict.fromkeys([*(series_of(r) for r in new), *moved]):
            members = self._members(store, series)
            if members and all(r.id > top for r in members):
                self._series += 1
            self._judged.pop(series, None)
            if _may_judge(members, series.by):
                self._judge(store, series, members)

    def _judge_key(self, series: Series) -> str:
        return judge_key(self.headlines.get(series.kind, []), self._pins.get(series))

    def _read_kept(self, series: Series, members: Sequence[RunSummary]) -> bool:
        """Take the series' kept judgement if it is of these runs, judged alike."""
        kept = self._kept.get(series.key())
        if kept is None or (kept.last_run, kept.runs, kept.judge) != (
                max(r.id for r in members), len(members), self._judge_key(series)):
            return False
        found = decode(series, kept.changes)
        if found is not None:
            self._judged[series] = found
        return True

    def _judge(self, store: Store, series: Series, members: Sequence[RunSummary],
               force: bool = False) -> None:
        if not force and self._read_kept(series, members):
            return
        found = judge_series(series, members, store, self.headlines.get(series.kind, []),
                             self._pins.get(series))
        self.computed += 1
        self._to_keep[series.key()] = Kept(max(r.id for r in members), len(members),
                                           self._judge_key(series), encode(found))
        if found is not None:
            self._judged[series] = found

    def _answer(self, state: tuple[int, int], baselines: tuple[int, ...]) -> WhatChanged:
        changes = sorted((c for found in self._judged.values() for c in found),
                         key=lambda c: (verdicts.rank(c.verdict, c.change_pct),
                                        natural_key(c.series.title), c.metric))
        steady = sorted((s for s, found in self._judged.items() if not found),
                        key=lambda s: natural_key(s.title))
        return WhatChanged(changes=tuple(changes), steady=tuple(steady),
                           cannot_tell=self._series - len(self._judged), series=self._series,
                           runs=self._runs, state=state, baselines=baselines)


def notes_of(change: Change, notes: Sequence[Annotation]) -> list[Annotation]:
    """The annotations that belong beside a change: on either of its two values (its
    series' `by`), on a label or variant value of its series (device=ap1: all of it), or
    at a time between the two values' first runs."""
    series = change.series
    own = {*series.variant, *series.labels}
    values = {str(change.before), str(change.after)}
    return [n for n in notes
            if (n.key == series.by and n.value in values)
            or (n.key is not None and (n.key, n.value) in own)
            or (n.at is not None and change.started_before <= n.at <= change.started_after)]


def keep_judged(store: Store, headlines: Mapping[str, Sequence[str]],
                ids: Iterable[int] | None = None) -> int:
    """Judge the series of the runs `ids` (None: every series) and keep the judgements in
    the store, for the dashboard's home to read; how many series were judged."""
    index = ChangeIndex(headlines, keep=True)
    if ids is None:
        index.refresh(store)
        return index.computed
    return index.keep_series(store, ids)


def what_changed(store: Store, headlines: Mapping[str, Sequence[str]]) -> WhatChanged:
    """Every series of the store judged (see the module doc); `headlines`: the figures
    to follow for each test kind (kinds.HEADLINES)."""
    return ChangeIndex(headlines).refresh(store)
