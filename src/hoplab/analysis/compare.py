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

The verdict for a metric, in this order (docs/compare.md explains why):

1. "n/a": the metric has no better direction (packets, bytes: "neutral" in the metric
   registry, hoplab/metrics.py), or it is not registered (the group warns).
2. "not enough data": a side has fewer than 2 runs with the metric, or the sizes
   are too small for the rank test to ever reach p <= alpha (its smallest two-sided
   p is 2 / C(na + nb, na): 1/3 for 2+2, 0.1 for 3+3, 0.029 for 4+4).
3. "better" / "worse": the Mann-Whitney p <= alpha, the (1 - alpha) bootstrap CI of
   the difference of medians excludes 0, and the change is at least
   `min_change_pct` (1 %) of A's median; the direction of the metric names it.
4. "same": otherwise; no difference larger than the noise between repetitions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hoplab import kv
from hoplab import metrics as registry
from hoplab.analysis.ranks import min_p as min_p_value
from hoplab.analysis.ranks import rank_p
from hoplab.errors import UsageError
from hoplab.record import RunRecord

VERDICTS = ("better", "worse", "same", "not enough data", "n/a")
_FIELDS = ("flow", "node", "key")
# p values from scipy land a few ulps either side of exact fractions such as 0.1.
_P_SLACK = 1e-9


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
    verdict: str                    # one of VERDICTS
    # What one value is: "run" (a run's figure) or a trial ("load": every page load of
    # every run, for the median of trials); a_runs/b_runs: how many runs they came from.
    per: str = "run"
    a_runs: int = 0
    b_runs: int = 0

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
                 min_change_pct: float = 1.0) -> list[MetricComparison]:
    """Compare A (the baseline) with B for each metric: the requested ones (NAME,
    NAME@FLOW, NAME@node=N,key=K), else every whole-run metric both sides have, plus
    with per_flow every per-flow one. Deterministic: every metric uses `seed`."""
    if not a or not b:
        raise UsageError("nothing to compare: " + ("A" if not a else "B") + " holds no runs")
    if not 0 < alpha < 1 or resamples < 1:
        raise UsageError(f"alpha must be in (0, 1) and resamples >= 1, not {alpha}, {resamples}")
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
        out.append(_compare(k, registry.unit(k.name, ua or ub), va, vb, seed=seed,
                            resamples=resamples, alpha=alpha, min_change_pct=min_change_pct,
                            trials=trials))
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


def _compare(k: MetricKey, unit: str, va: list[float], vb: list[float], *, seed: int,
             resamples: int, alpha: float, min_change_pct: float,
             trials: tuple[str, list[list[float]], list[list[float]]] | None = None
             ) -> MetricComparison:
    runs = (len(va), len(vb))
    if trials is not None:
        va, vb = ([v for run in side for v in run] for side in trials[1:])
    ma = float(np.median(va)) if va else math.nan
    mb = float(np.median(vb)) if vb else math.nan
    change = 100 * (mb - ma) / abs(ma) if ma != 0 else math.nan
    enough = len(va) >= 2 and len(vb) >= 2
    if not enough:
        ci_pct, ci_diff = (math.nan, math.nan), (math.nan, math.nan)
    elif trials is None:
        ci_pct, ci_diff = bootstrap(va, vb, seed=seed, resamples=resamples, alpha=alpha)
    else:
        ci_pct, ci_diff = bootstrap_trials(trials[1], trials[2], seed=seed,
                                           resamples=resamples, alpha=alpha)
    p = rank_p(va, vb) if enough else None
    direction = registry.better(k.name)
    if direction is None:
        verdict = "n/a"
    elif not enough or min_p_value(len(va), len(vb)) > alpha * (1 + _P_SLACK):
        verdict = "not enough data"
    elif (p is not None and p <= alpha * (1 + _P_SLACK) and (ci_diff[0] > 0 or ci_diff[1] < 0)
          and (abs(change) >= min_change_pct if not math.isnan(change) else mb != ma)):
        verdict = "better" if (mb > ma) == (direction == "higher") else "worse"
    else:
        verdict = "same"
    return MetricComparison(
        metric=k.name, unit=unit, flow=k.flow, node=k.node, key=k.key,
        a_values=tuple(va), b_values=tuple(vb), a_median=ma, b_median=mb, change_pct=change,
        ci_low_pct=ci_pct[0], ci_high_pct=ci_pct[1], p_value=p, verdict=verdict,
        per="run" if trials is None else trials[0], a_runs=runs[0], b_runs=runs[1])


def bootstrap(va: Sequence[float], vb: Sequence[float], *, seed: int, resamples: int,
              alpha: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Percentile bootstrap CIs of B's median against A's: (of the change in %, of the
    difference). Each resample draws len(va) runs of A, then len(vb) runs of B, with
    replacement, from numpy's default_rng(seed), all A draws before all B draws."""
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(va, dtype=float), np.asarray(vb, dtype=float)
    ia = rng.integers(0, len(xa), size=(resamples, len(xa)))
    ib = rng.integers(0, len(xb), size=(resamples, len(xb)))
    return _intervals(np.median(xa[ia], axis=1), np.median(xb[ib], axis=1), alpha)


def bootstrap_trials(ca: Sequence[Sequence[float]], cb: Sequence[Sequence[float]], *,
                     seed: int, resamples: int,
                     alpha: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """bootstrap for trials grouped by run (each inner list one run's): a resample draws
    as many runs as the side has, with replacement, then within each drawn run as many
    of its trials, with replacement, and takes the median of all drawn trials. Trials of
    one run share its conditions: a spread between runs widens the interval, as it
    should; with one run a side only the trials' own spread is left. All A draws first."""
    rng = np.random.default_rng(seed)
    return _intervals(_trial_medians(rng, ca, resamples), _trial_medians(rng, cb, resamples),
                      alpha)


def _trial_medians(rng: np.random.Generator, runs: Sequence[Sequence[float]],
                   resamples: int) -> Any:
    n, longest = len(runs), max(len(r) for r in runs)
    lens = np.array([len(r) for r in runs])
    table = np.full((n, longest), np.nan)
    for i, r in enumerate(runs):
        table[i, :len(r)] = r
    drawn = rng.integers(0, n, size=(resamples, n))
    size = lens[drawn][..., None]                       # (resamples, n, 1)
    pick = (rng.random((resamples, n, longest)) * size).astype(int)
    values = np.where(np.arange(longest) < size, table[drawn[..., None], pick], np.nan)
    return np.nanmedian(values.reshape(resamples, -1), axis=1)


def _intervals(ma: Any, mb: Any, alpha: float) -> tuple[tuple[float, float],
                                                        tuple[float, float]]:
    """The (alpha/2, 1 - alpha/2) percentiles of the resampled change in % and
    difference; no percent interval when a resampled A median is 0."""
    q = (100 * alpha / 2, 100 * (1 - alpha / 2))
    lo_d, hi_d = (float(x) for x in np.percentile(mb - ma, q))
    if np.any(ma == 0):
        return (math.nan, math.nan), (lo_d, hi_d)
    lo_p, hi_p = (float(x) for x in np.percentile(100 * (mb - ma) / np.abs(ma), q))
    return (lo_p, hi_p), (lo_d, hi_d)
