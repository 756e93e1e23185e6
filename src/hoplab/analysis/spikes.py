"""Latency spikes and level shifts in an RTT series, and whether they recur with a period.

Two kinds of event. A level shift is a change of the RTT's level that holds for
at least MIN_LEVEL_S seconds: an idle phase giving way to a load phase, or an
SFQ rehash moving a flow into (or out of) a busy flow's slot for a whole
perturbation interval. It is found where the medians of the LEVEL_WINDOW_S
seconds before and after a sample differ by more than the threshold below, and
placed at the split that fits the two levels best (least absolute deviation
from each side's median). Two opposite shifts closer than MIN_LEVEL_S are an
excursion, not a level: a spike.

A spike is a run of samples well above the series' own baseline: a running
median over BASELINE_WINDOW_S seconds within each level (never across a level
shift, so the end of a plateau is not a spike), which does not follow a spike
of a few samples. "Well above" is the largest of THRESHOLD_SIGMAS robust standard
deviations of the residuals (1.4826 x their median absolute deviation),
THRESHOLD_RELATIVE of the baseline and THRESHOLD_MIN_MS, so that neither a
quiet series' scheduler noise nor a bloated queue's ordinary wobble counts.
Samples above it less than MERGE_GAP_S apart are one spike; its time is its
onset (the first sample above), which is when the cause (an SFQ rehash, a
scan, a timer) acted; the peak lags it by the time the queue took to drain.

A period is looked for in the prominent events (spike onsets and level shifts at
least PROMINENCE of the largest one's size), not the samples: with a spike
every few seconds and pings every 0.2 s, the samples' autocorrelation is
dominated by the baseline, while the onsets are a point process whose
periodogram (the Rayleigh statistic Z = |sum exp(2 pi i f t)|^2 / n) is exact.
Z is computed on a grid of frequencies between MIN_CYCLES cycles per span and
the rate the sampling can resolve; the p value of the best peak (Zar's small
sample formula) is multiplied by the number of independent frequencies looked
at. A spike train with period P also peaks at 2/P, 3/P...: the lowest
significant frequency is the period. Two guards keep clusters from passing
for periods: the grid slots between the first and the last onset must be at
least MIN_OCCUPANCY occupied, over at least MIN_CYCLES cycles. The period is
refined by a least-squares fit of the onsets against their cycle numbers,
which also gives its standard error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hoplab.record import Metric, Series

BASELINE_WINDOW_S = 5.0
THRESHOLD_SIGMAS = 6.0
THRESHOLD_RELATIVE = 0.25
THRESHOLD_MIN_MS = 1.0
MERGE_GAP_S = 0.5
LEVEL_WINDOW_S = 1.0
MIN_LEVEL_S = 2.0
MIN_LEVEL_SAMPLES = 3
# Events as large as this fraction of the largest are the ones a period is looked for
# in: a 5 ms scheduling blip beside 145 ms rehash steps is not part of their rhythm.
PROMINENCE = 0.25
MIN_SPIKES_FOR_PERIOD = 4
MIN_CYCLES = 3
# SFQ's rehashes move a flow's RTT on some of its perturbation intervals, not all
# (seed 004: "the spikes do not occur at every interval but on the grid").
MIN_OCCUPANCY = 0.3
SIGNIFICANCE = 0.01
# A grid point every 1/(OVERSAMPLE x span) Hz: the periodogram's peaks are 1/span wide.
# At most MAX_FREQUENCIES of them (an hour of pings), then coarser: a peak is still
# found, and _fit refines it.
OVERSAMPLE = 10
MAX_FREQUENCIES = 20_000

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Spike:
    start: float        # onset: time of the first sample above the threshold (s)
    end: float          # time of the last sample above it
    peak_t: float
    peak_ms: float      # the highest RTT in the spike
    size_ms: float      # the peak above the baseline at that moment
    samples: int


@dataclass(frozen=True)
class Shift:
    at: float           # the first sample of the new level (s)
    before_ms: float    # the median of the level before
    after_ms: float     # and after


@dataclass(frozen=True)
class Period:
    period_s: float
    stderr_s: float
    phase_s: float       # onset time of the fitted grid's first cycle
    confidence: float    # 1 - the p value corrected for the frequencies searched
    on_grid: int         # spikes within a quarter period of the grid
    cycles: int          # grid slots from the first to the last onset


@dataclass(frozen=True)
class SpikeReport:
    baseline_ms: float   # median of the running baseline
    threshold_ms: float  # how far above the baseline a sample must be (the smallest margin)
    spikes: tuple[Spike, ...]
    period: Period | None
    shifts: tuple[Shift, ...] = ()

    @property
    def count(self) -> int:
        return len(self.spikes)


def running_median(t: Array, v: Array, window_s: float,
                   bounds: Sequence[int] = ()) -> Array:
    """Median of the samples within window_s / 2 of each sample's time, never across
    the sample indexes in `bounds` (the first samples of new levels)."""
    half = window_s / 2
    lo = np.searchsorted(t, t - half, side="left")
    hi = np.searchsorted(t, t + half, side="right")
    edges = np.array([0, *sorted(bounds), len(t)])
    level = np.searchsorted(edges, np.arange(len(t)), side="right") - 1
    lo = np.maximum(lo, edges[level])
    hi = np.minimum(hi, edges[level + 1])
    return np.array([np.median(v[a:b]) for a, b in zip(lo, hi, strict=True)])


def _margin(level: Array | float, sigma: float) -> Array:
    """How far from a level a sample must be to count: the largest of THRESHOLD_SIGMAS
    robust standard deviations, THRESHOLD_RELATIVE of the level and THRESHOLD_MIN_MS."""
    return np.maximum(np.maximum(THRESHOLD_SIGMAS * sigma,
                                 THRESHOLD_RELATIVE * np.asarray(level, dtype=float)),
                      THRESHOLD_MIN_MS)


def level_shifts(t: Array, v: Array, sigma: float) -> list[tuple[int, float, float]]:
    """(index of the first sample of the new level, level before, level after)."""
    lo = np.searchsorted(t, t - LEVEL_WINDOW_S, side="left")
    hi = np.searchsorted(t, t + LEVEL_WINDOW_S, side="left")
    idx = np.arange(len(t))
    ok = (idx - lo >= MIN_LEVEL_SAMPLES) & (hi - idx >= MIN_LEVEL_SAMPLES)
    left = np.array([np.median(v[a:i]) if k else np.nan
                     for a, i, k in zip(lo, idx, ok, strict=True)])
    right = np.array([np.median(v[i:b]) if k else np.nan
                      for i, b, k in zip(idx, hi, ok, strict=True)])
    with np.errstate(invalid="ignore"):
        jump = np.abs(right - left)
        hit = ok & (jump > _margin(np.fmin(left, right), sigma))
    found: list[tuple[int, float, float]] = []
    i = 0
    while i < len(t):
        if not hit[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(t) and hit[j + 1]:
            j += 1
        # Every sample within a window of the step sees the step: place it at the
        # split of the stretch around the run that fits two levels best.
        a, b = int(lo[i]), int(hi[j])
        at = _best_split(v[a:b]) + a
        found.append((at, float(np.median(v[a:at])), float(np.median(v[at:b]))))
        i = j + 1
    return _drop_excursions(t, found)


def _best_split(x: Array) -> int:
    best, where = math.inf, 1
    for k in range(MIN_LEVEL_SAMPLES, len(x) - MIN_LEVEL_SAMPLES + 1):
        a, b = x[:k], x[k:]
        cost = float(np.abs(a - np.median(a)).sum() + np.abs(b - np.median(b)).sum())
        if cost < best:
            best, where = cost, k
    return where


def _drop_excursions(t: Array, found: list[tuple[int, float, float]]
                     ) -> list[tuple[int, float, float]]:
    """A rise and a fall (or a fall and a rise) closer than MIN_LEVEL_S is one spike, not
    two levels: both go. Of two shifts the same way that close, the larger stays."""
    out = list(found)
    changed = True
    while changed:
        changed = False
        for k in range(len(out) - 1):
            (i, b0, a0), (j, b1, a1) = out[k], out[k + 1]
            if t[j] - t[i] >= MIN_LEVEL_S:
                continue
            if (a0 > b0) != (a1 > b1):
                del out[k:k + 2]
            else:
                del out[k + (abs(a0 - b0) >= abs(a1 - b1))]
            changed = True
            break
    return out


def find_spikes(t: Sequence[float] | Array, v: Sequence[float] | Array) -> SpikeReport:
    ta = np.asarray(t, dtype=float)
    va = np.asarray(v, dtype=float)
    if len(ta) != len(va):
        raise ValueError(f"{len(ta)} times for {len(va)} values")
    order = np.argsort(ta, kind="stable")
    ta, va = ta[order], va[order]
    if len(ta) < 5:
        return SpikeReport(float(np.median(va)) if len(va) else math.nan, math.nan, (), None)
    # The noise: residuals from a running median (levels and spikes alike are outliers
    # to the median absolute deviation).
    rough = va - running_median(ta, va, BASELINE_WINDOW_S)
    sigma = 1.4826 * float(np.median(np.abs(rough - np.median(rough))))
    shifts = level_shifts(ta, va, sigma)
    base = running_median(ta, va, BASELINE_WINDOW_S, [i for i, _, _ in shifts])
    resid = va - base
    margin = _margin(base, sigma)
    above = np.flatnonzero(resid > margin)
    spikes: list[Spike] = []
    group: list[int] = []
    for i in above:
        if group and ta[i] - ta[group[-1]] > MERGE_GAP_S:
            spikes.append(_spike(ta, va, base, group))
            group = []
        group.append(int(i))
    if group:
        spikes.append(_spike(ta, va, base, group))
    dt = float(np.median(np.diff(ta))) if len(ta) > 1 else math.nan
    moved = [Shift(float(ta[i]), before, after) for i, before, after in shifts]
    sized = [(s.start, s.size_ms) for s in spikes] + [
        (m.at, abs(m.after_ms - m.before_ms)) for m in moved]
    largest = max((size for _, size in sized), default=0.0)
    events = _merge(sorted(t for t, size in sized if size >= PROMINENCE * largest))
    period = find_period(events, float(ta[0]), float(ta[-1]), dt)
    return SpikeReport(float(np.median(base)), float(np.min(margin)), tuple(spikes), period,
                       tuple(moved))


def _merge(times: list[float]) -> list[float]:
    """Events closer than MERGE_GAP_S are one (a plateau's rise and the spike on it)."""
    out: list[float] = []
    for x in times:
        if not out or x - out[-1] > MERGE_GAP_S:
            out.append(x)
    return out


def _spike(t: Array, v: Array, base: Array, idx: list[int]) -> Spike:
    peak = max(idx, key=lambda i: v[i])
    return Spike(float(t[idx[0]]), float(t[idx[-1]]), float(t[peak]), float(v[peak]),
                 float(v[peak] - base[peak]), len(idx))


def find_period(onsets: Sequence[float], t_first: float, t_last: float,
                sample_dt: float) -> Period | None:
    """The period of the onsets, or None when they do not recur with one."""
    x = np.sort(np.asarray(onsets, dtype=float))
    n = len(x)
    span = t_last - t_first
    if n < MIN_SPIKES_FOR_PERIOD or span <= 0:
        return None
    # The shortest period the sampling and the merging of samples into spikes can show.
    shortest = max(2 * MERGE_GAP_S, 4 * sample_dt if math.isfinite(sample_dt) else 0.0)
    f_lo, f_hi = MIN_CYCLES / span, 1 / shortest
    if f_hi <= f_lo:
        return None
    step = max(1 / (OVERSAMPLE * span), (f_hi - f_lo) / MAX_FREQUENCIES)
    freqs = np.arange(f_lo, f_hi, step)
    z = _rayleigh_z(x, freqs)
    # P(Z >= z) for n uniformly random phases (Zar, Biostatistical Analysis, 27.4),
    # times the number of independent frequencies searched.
    trials = max(1.0, span * (f_hi - f_lo))
    r2 = np.maximum(z, 0.0) * n
    p_raw = np.exp(np.sqrt(np.maximum(1 + 4 * n + 4 * (n * n - r2), 0.0)) - (1 + 2 * n))
    p_adj = np.minimum(1.0, p_raw * trials)
    for i in np.flatnonzero(p_adj < SIGNIFICANCE):
        # Local maxima only, lowest frequency first: the fundamental of a harmonic series.
        if (i > 0 and z[i - 1] > z[i]) or (i + 1 < len(z) and z[i + 1] > z[i]):
            continue
        found = _fit(x, float(freqs[i]), step, float(p_adj[i]))
        if found is not None:
            return found
    return None


def _rayleigh_z(x: Array, freqs: Array) -> Array:
    phase = 2 * np.pi * np.outer(freqs, x)
    return np.asarray((np.cos(phase).sum(axis=1) ** 2 + np.sin(phase).sum(axis=1) ** 2)
                      / len(x), dtype=float)


def _fit(x: Array, freq: float, step: float, p_adj: float) -> Period | None:
    # Refine the peak on a grid a hundred times finer than the periodogram's.
    fine = np.linspace(freq - step, freq + step, 201)
    freq = float(fine[int(np.argmax(_rayleigh_z(x, fine)))])
    period = 1 / freq
    mean_phase = math.atan2(float(np.sin(2 * np.pi * freq * x).sum()),
                            float(np.cos(2 * np.pi * freq * x).sum()))
    origin = mean_phase / (2 * np.pi * freq)
    cycle = np.round((x - origin) / period)
    off = np.abs(x - origin - cycle * period)
    near = off <= period / 4
    k, y = cycle[near], x[near]
    slots = int(cycle.max() - cycle.min()) + 1
    occupied = len(np.unique(k))
    if slots < MIN_CYCLES or occupied / slots < MIN_OCCUPANCY or len(np.unique(k)) < 3:
        return None
    slope, intercept = np.polyfit(k, y, 1)
    resid = y - (slope * k + intercept)
    # Once more without the events that sit well off the first fit (a flood that ended
    # between two rehashes): a least-squares line is pulled by its outliers.
    keep = np.abs(resid) <= max(4 * 1.4826 * float(np.median(np.abs(resid))), 0.02 * slope)
    if keep.sum() >= 3 and not keep.all():
        k, y = k[keep], y[keep]
        slope, intercept = np.polyfit(k, y, 1)
        resid = y - (slope * k + intercept)
    dof = len(y) - 2
    stderr = (math.sqrt(float(np.sum(resid ** 2)) / dof / float(np.sum((k - k.mean()) ** 2)))
              if dof > 0 else math.nan)
    first = float(intercept + slope * cycle.min())
    return Period(float(slope), stderr, first, 1 - p_adj, int(near.sum()), slots)


def spike_figures(rtt: Series) -> tuple[list[Metric], list[Series]]:
    """Whole-flow figures of one RTT series, and its events as series of their own, which
    the plots mark: rtt_spike (each spike's onset, its size above the baseline in ms)
    and rtt_shift (each level shift's time, the change of level in ms)."""
    report = find_spikes(rtt.t, rtt.v)
    flow = rtt.flow
    metrics = [Metric("spikes", float(report.count), "count", flow=flow)]
    series: list[Series] = []
    if report.spikes:
        metrics.append(Metric("spike_max", max(s.size_ms for s in report.spikes), "ms",
                              flow=flow))
        series.append(Series("rtt_spike", "ms", [s.start for s in report.spikes],
                             [s.size_ms for s in report.spikes], flow=flow, key=rtt.key))
    if report.shifts:
        metrics.append(Metric("level_shifts", float(len(report.shifts)), "count", flow=flow))
        series.append(Series("rtt_shift", "ms", [m.at for m in report.shifts],
                             [m.after_ms - m.before_ms for m in report.shifts], flow=flow,
                             key=rtt.key))
    if report.period is not None:
        metrics += [Metric("spike_period", report.period.period_s, "s", flow=flow),
                    Metric("spike_period_confidence", 100 * report.period.confidence, "%",
                           flow=flow)]
    return metrics, series
