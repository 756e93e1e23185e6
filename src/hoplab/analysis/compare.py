"""Two groups of runs, metric by metric: medians, change, bootstrap CI, rank test, verdict.

One observation is one run: a run's figure (its goodput, its RTT median) is
already a summary of thousands of samples, and the samples inside a run are
not independent of each other, so only repetitions count as evidence.

Except for the median of trials a run keeps one by one (metrics.trials: every page
load of a web test, each a fresh browser loading the page anew): each trial is then
an observation, the rank test compares all of A's with all of B's, and the bootstrap
resamples runs and then trials within them, so that a spread between runs still
widens the interval. That needs the runs' series (Store.get_run(series=...)); runs
read without them are compared per run.

This module finds each metric's values on both sides; the verdict rule
(analysis/verdict_rule.py: the rank test with its bootstrap interval) judges them, in
the words of analysis/verdicts.py (docs/compare.md explains both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hoplab import kv
from hoplab import metrics as registry
from hoplab.analysis import verdicts
from hoplab.analysis.verdict_rule import MARGIN_PCT, MIN_CHANGE_PCT, Rule, judge
from hoplab.errors import UsageError
from hoplab.record import RunRecord

VERDICTS = verdicts.VERDICTS
_FIELDS = ("flow", "node", "key")


@dataclass(frozen=True)
class MetricKey:
    """Which figure of a run: its name and, for per-flow or per-node figures, where.

    Written NAME (a whole-run figure), NAME@FLOW, or NAME@node=N[,key=K][,flow=F]:
    goodput, goodput@bulk.1, cpu.softirq@node=router,key=all.
    """

    name: str
    flow: str | None = None
    node: str | None = None
    key: str | None = None

    def __str__(self) -> str:
        if self.node is None and self.key is None:
            return self.name if self.flow is None else f"{self.name}@{self.flow}"
        where = ",".join(f"{f}={getattr(self, f)}" for f in _FIELDS if getattr(self, f))
        return f"{self.name}@{where}"


def parse_metric(text: str) -> MetricKey:
    name, sep, where = (p.strip() for p in text.partition("@"))
    if not name or (sep and not where):
        raise UsageError(f"metric {text!r}: expected NAME, NAME@FLOW or NAME@node=N,key=K")
    if "=" not in where:
        return MetricKey(name, flow=where or None)
    parts: dict[str, str] = {}
    for item in where.split(","):
        field, value = kv.split(item, f"metric {text!r}, part", "node=r1")
        if field not in _FIELDS:
            raise UsageError(f"metric {text!r}: {item!r} is not flow=, node= or key=VALUE")
        parts[field] = value
    return MetricKey(name, **parts)


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    unit: str
    flow: str | None
    node: str | None
    key: str | None
    a_values: tuple[float, ...]     # one value per run (repetition) that has the metric
    b_values: tuple[float, ...]
    a_median: float
    b_median: float
    change_pct: float               # 100 * (b_median - a_median) / |a_median|; nan if a is 0
    ci_low_pct: float               # (1 - alpha) bootstrap CI of change_pct; nan if not
    ci_high_pct: float              # computable (a side < 2 runs, a resampled A median 0)
    p_value: float | None           # two-sided Mann-Whitney U; None if a side has < 2 values
    verdict: str                    # one of analysis/verdicts.py VERDICTS
    # What one value is: "run" (a run's figure) or a trial ("load": every page load of
    # every run, for the median of trials); a_runs/b_runs: how many runs they came from.
    per: str = "run"
    a_runs: int = 0
    b_runs: int = 0
    # For "unclear" (no clear difference): the smallest change in % these repetitions
    # would find 80 % of the time at alpha (inf: none can); nan for other verdicts.
    detectable_pct: float = math.nan

    @property
    def label(self) -> str:
        return str(MetricKey(self.metric, self.flow, self.node, self.key))


def check_measurement_version(a: Sequence[RunRecord], b: Sequence[RunRecord]) -> None:
    """UsageError unless every run was measured the same way (only like with like)."""
    versions = {r.measurement_version for r in (*a, *b)}
    if len(versions) > 1:
        sides = "; ".join(
            f"{side}: " + ", ".join(f"run {r.id} v{r.measurement_version}" for r in runs)
            for side, runs in (("A", a), ("B", b)))
        raise UsageError(
            f"runs measured with different measurement versions {sorted(versions)} ({sides}): "
            "hoplab changed how it measures between them, so their figures are not "
            "comparable; only like with like")


def compare_runs(a: Sequence[RunRecord], b: Sequence[RunRecord],
                 metrics: Sequence[str] | None = None, *, per_flow: bool = False,
                 seed: int = 0, resamples: int = 2000, alpha: float = 0.05,
                 margin_pct: float = MARGIN_PCT, min_change_pct: float = MIN_CHANGE_PCT,
                 rule: Rule = judge) -> list[MetricComparison]:
    """Compare A (the baseline) with B for each metric: the requested ones (NAME,
    NAME@FLOW, NAME@node=N,key=K), else every whole-run metric both sides have, plus
    with per_flow every per-flow one; `rule` gives each verdict (margin_pct: what
    "same" must show). Deterministic: every metric uses `seed`."""
    if not a or not b:
        raise UsageError("nothing to compare: " + ("A" if not a else "B") + " holds no runs")
    if not 0 < alpha < 1 or resamples < 1:
        raise UsageError(f"alpha must be in (0, 1) and resamples >= 1, not {alpha}, {resamples}")
    if not margin_pct >= 0:
        raise UsageError(f"the margin must be 0 % or more, not {margin_pct}")
    check_measurement_version(a, b)
    keys = [parse_metric(m) for m in metrics] if metrics else _common(a, b, per_flow)
    out = []
    for k in keys:
        ua, va = _values(a, k)
        ub, vb = _values(b, k)
        if not va and not vb:
            raise UsageError(f"no run on either side has metric {k}")
        ta, tb = _trials(a, k), _trials(b, k)
        trials = (ta[0], ta[1], tb[1]) if ta and tb and ta[1] and tb[1] else None
        out.append(_compare(k, registry.unit(k.name, ua or ub), va, vb, rule=rule, seed=seed,
                            resamples=resamples, alpha=alpha, margin_pct=margin_pct,
                            min_change_pct=min_change_pct, trials=trials))
    return out


def _common(a: Sequence[RunRecord], b: Sequence[RunRecord], per_flow: bool) -> list[MetricKey]:
    def keys(runs: Sequence[RunRecord]) -> dict[MetricKey, None]:
        return {MetricKey(m.name, m.flow, m.node, m.key): None for r in runs for m in r.metrics
                if m.node is None and m.key is None and (per_flow or m.flow is None)}
    in_b = keys(b)
    found = [k for k in keys(a) if k in in_b]
    # Whole-run figures first, then each flow's: the order a reader scans them in.
    return sorted(found, key=lambda k: k.flow is not None)


def _values(runs: Sequence[RunRecord], k: MetricKey) -> tuple[str, list[float]]:
    unit, values = "", []
    for r in runs:
        for m in r.metrics:
            if (m.name, m.flow, m.node, m.key) == (k.name, k.flow, k.node, k.key):
                # NaN means "not measured" and inf a broken tool output: neither is evidence.
                if math.isfinite(m.value):
                    unit = unit or m.unit
                    values.append(float(m.value))
                break
    return unit, values


def _trials(runs: Sequence[RunRecord], k: MetricKey) -> tuple[str, list[list[float]]] | None:
    """(what a trial is, each run's trials) for the median of trials (metrics.trials),
    from the runs that have the figure: a whole-run figure pools every flow's series,
    a flow's figure its own. None for another metric, or when a run with the figure has
    no trials to show (read without its series, or stored so)."""
    found = registry.trials(k.name)
    if found is None or k.node is not None or k.key is not None:
        return None
    series, word = found
    out = []
    for r in runs:
        if not any((m.name, m.flow, m.node, m.key) == (k.name, k.flow, None, None)
                   and math.isfinite(m.value) for m in r.metrics):
            continue
        points = [v for s in r.series if s.name == series and s.node is None
                  and s.key is None and (k.flow is None or s.flow == k.flow)
                  for v in s.v if math.isfinite(v)]
        if not points:
            return None
        out.append(points)
    return word, out


def _compare(k: MetricKey, unit: str, va: list[float], vb: list[float], *, rule: Rule,
             seed: int, resamples: int, alpha: float, margin_pct: float,
             min_change_pct: float,
             trials: tuple[str, list[list[float]], list[list[float]]] | None = None
             ) -> MetricComparison:
    runs = (len(va), len(vb))
    if trials is not None:
        va, vb = ([v for run in side for v in run] for side in trials[1:])
    ma = float(np.median(va)) if va else math.nan
    mb = float(np.median(vb)) if vb else math.nan
    judged = rule(va, vb, registry.better(k.name), alpha=alpha, margin_pct=margin_pct,
                  min_change_pct=min_change_pct, seed=seed, resamples=resamples,
                  trials=None if trials is None else (trials[1], trials[2]))
    return MetricComparison(
        metric=k.name, unit=unit, flow=k.flow, node=k.node, key=k.key,
        a_values=tuple(va), b_values=tuple(vb), a_median=ma, b_median=mb,
        change_pct=100 * (mb - ma) / abs(ma) if ma != 0 else math.nan,
        ci_low_pct=judged.ci_pct[0], ci_high_pct=judged.ci_pct[1], p_value=judged.p,
        verdict=judged.verdict, per="run" if trials is None else trials[0],
        a_runs=runs[0], b_runs=runs[1], detectable_pct=judged.detectable_pct)
