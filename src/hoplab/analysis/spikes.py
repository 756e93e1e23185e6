"""Latency spikes in an RTT series, and whether they recur with a period.

A spike is a run of samples well above the series' own baseline: a running
median over BASELINE_WINDOW_S seconds, which follows a change of level (an idle
phase giving way to a load phase) within half a window but not a spike of a
few samples. "Well above" is the largest of THRESHOLD_SIGMAS robust standard
deviations of the residuals (1.4826 x their median absolute deviation),
THRESHOLD_RELATIVE of the baseline and THRESHOLD_MIN_MS, so that neither a
quiet series' scheduler noise nor a bloated queue's ordinary wobble counts.
Samples above it less than MERGE_GAP_S apart are one spike; its time is its
onset (the first sample above), which is when the cause (an SFQ rehash, a
scan, a timer) acted; the peak lags it by the time the queue took to drain.

A period is looked for in the spike onsets, not the samples: with a spike
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
MIN_SPIKES_FOR_PERIOD = 4
MIN_CYCLES = 3
MIN_OCCUPANCY = 0.5
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

    @property
    def count(self) -> int:
        return len(self.spikes)


def running_median(t: Array, v: Array, window_s: float) -> Array:
    """Median of the samples within window_s / 2 of each sample's time."""
    half = window_s / 2
    lo = np.searchsorted(t, t - half, side="left")
    hi = np.searchsorted(t, t + half, side="right")
    return np.array([np.median(v[a:b]) for a, b in zip(lo, hi, strict=True)])


def find_spikes(t: Sequence[float] | Array, v: Sequence[float] | Array) -> SpikeReport:
    ta = np.asarray(t, dtype=float)
    va = np.asarray(v, dtype=float)
    if len(ta) != len(va):
        raise ValueError(f"{len(ta)} times for {len(va)} values")
    order = np.argsort(ta, kind="stable")
    ta, va = ta[order], va[order]
    if len(ta) < 5:
        return SpikeReport(float(np.median(va)) if len(va) else math.nan, math.nan, (), None)
    base = running_median(ta, va, BASELINE_WINDOW_S)
    resid = va - base
    sigma = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
    margin = np.maximum(np.maximum(THRESHOLD_SIGMAS * sigma, THRESHOLD_RELATIVE * base),
                        THRESHOLD_MIN_MS)
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
    period = find_period([s.start for s in spikes], float(ta[0]), float(ta[-1]), dt)
    return SpikeReport(float(np.median(base)), float(np.min(margin)), tuple(spikes), period)


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
    dof = len(y) - 2
    stderr = (math.sqrt(float(np.sum(resid ** 2)) / dof / float(np.sum((k - k.mean()) ** 2)))
              if dof > 0 else math.nan)
    first = float(intercept + slope * cycle.min())
    return Period(float(slope), stderr, first, 1 - p_adj, int(near.sum()), slots)


def spike_figures(rtt: Series) -> tuple[list[Metric], list[Series]]:
    """Whole-flow figures of one RTT series and the spikes as a series of their own
    (time of each onset, size above the baseline in ms), which the plots mark."""
    report = find_spikes(rtt.t, rtt.v)
    flow = rtt.flow
    metrics = [Metric("spikes", float(report.count), "count", flow=flow)]
    series: list[Series] = []
    if report.spikes:
        metrics.append(Metric("spike_max", max(s.size_ms for s in report.spikes), "ms",
                              flow=flow))
        series.append(Series("rtt_spike", "ms", [s.start for s in report.spikes],
                             [s.size_ms for s in report.spikes], flow=flow, key=rtt.key))
    if report.period is not None:
        metrics += [Metric("spike_period", report.period.period_s, "s", flow=flow),
                    Metric("spike_period_confidence", 100 * report.period.confidence, "%",
                           flow=flow)]
    return metrics, series
