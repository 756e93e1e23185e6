"""What a chart says of what it draws: the stored figures of the run, for the phase they
belong to, never one recomputed from the drawn points.

`hoplab show`, compare and the report's tables print the metrics the run stored; a
legend that averaged the drawn series instead said 89.2 Mbit/s where show said 95.4
(the series runs on past the flows' end, at 0), and on rrul averaged the idle phases
in with the load. So a total quotes the stored mean rate (over the test's load
window) and goodput, a flow its goodput, and latency is quoted per phase: the idle
and loaded RTT rrul stores (every ping and probe RTT pooled by phase), or a flow's
own median where the run has one phase. The matplotlib plots (plot_parts and the
plots_* modules) and the plotly charts (charts.py) both read these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from hoplab import metrics
from hoplab.record import RunRecord, Series
from hoplab.render.units import figure

LOAD = "load"


class Phase(NamedTuple):
    name: str
    start_s: float
    end_s: float


def phases(run: RunRecord) -> list[Phase]:
    """The run's phases (rrul: idle, load, idle-after) as its metadata lists them."""
    test = run.metadata.get("test") if isinstance(run.metadata, dict) else None
    raw = test.get("phases") if isinstance(test, dict) else None
    out = []
    for p in raw if isinstance(raw, list) else []:
        try:
            out.append(Phase(str(p["name"]), float(p["start_s"]), float(p["end_s"])))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def phased(run: RunRecord) -> bool:
    """Whether the run's figures belong to phases: a load phase between idle ones."""
    ph = phases(run)
    return len(ph) > 1 and any(p.name == LOAD for p in ph)


def stored(run: RunRecord, name: str, flow: str | None = None) -> float | None:
    """The run's metric `name` (whole-run, or of `flow`), None if it has none."""
    v = run.metric(name, flow=flow)
    return v if v is not None and math.isfinite(v) else None


def _said(run: RunRecord, names: Sequence[str], flow: str | None = None) -> list[str]:
    out = []
    for name in names:
        v = stored(run, name, flow)
        if v is not None:
            out.append(f"{metrics.label(name).removesuffix(' up').removesuffix(' down')} "
                       f"{figure(v, name)}")
    return out


def total(run: RunRecord, key: str | None) -> str:
    """A total throughput line (key None, "up" or "down"): its stored mean rate over the
    load and its goodput, as show prints them: "mean rate 95.2 Mbit/s, goodput 95.7
    Mbit/s" (the mean of the drawn series would count the idle time around the flows)."""
    suffix = "" if key is None else f"_{key}"
    mean = _said(run, (f"throughput_mean{suffix}",))
    if mean and phased(run):
        mean[0] += f" ({LOAD} phase)"
    return ", ".join(mean + _said(run, (f"goodput{suffix}",)))


def flow_rate(run: RunRecord, s: Series) -> str:
    """A flow's throughput line: its stored goodput (a --bidir flow's is both ways, so
    not quoted beside one direction's line)."""
    return "" if s.key is not None else ", ".join(_said(run, ("goodput",), s.flow))


def flow_latency(run: RunRecord, s: Series) -> str:
    """An RTT (or one-way delay) line: its flow's stored median where the run has one
    phase; where it has several, none (the flow's median pools idle and load: the
    phases' own figures are phase_latency's)."""
    v = None if phased(run) else stored(run, f"{s.name}_median", s.flow)
    return "" if v is None else f"median {figure(v, f'{s.name}_median')}"


@dataclass(frozen=True)
class PhaseLatency:
    """A stored latency figure of one kind of phase: rrul's idle or loaded RTT."""

    metric: str                         # latency_idle, latency_load
    value: float                        # ms
    spans: tuple[tuple[float, float], ...]

    @property
    def text(self) -> str:
        return f"{metrics.label(self.metric)} {figure(self.value, self.metric)}"


def phase_latency(run: RunRecord) -> list[PhaseLatency]:
    """The run's stored idle and loaded RTT with the phases each covers (the median of
    every ping and probe RTT in them, as run/figures.py phase_latency pools them)."""
    if not phased(run):
        return []
    ph = phases(run)
    out = []
    for metric, loaded in (("latency_idle", False), ("latency_load", True)):
        v = stored(run, metric)
        if v is not None:
            out.append(PhaseLatency(metric, v, tuple((p.start_s, p.end_s) for p in ph
                                                     if (p.name == LOAD) == loaded)))
    return out


@dataclass(frozen=True)
class Samples:
    """One curve of a distribution: its samples and the stored figure it is quoted by."""

    label: str                          # "load", "idle", a flow's name, or "" (all)
    values: list[float]
    median: str                         # "loaded RTT 34.5 ms", "median 0.064 ms", ""


def distribution(run: RunRecord, series: str = "rtt") -> list[Samples]:
    """The samples of `series` as a CDF should split them: by phase where the run stores
    a figure per phase (rrul's idle and loaded RTT: the samples pooled as it pools
    them), else the whole run where it stores a pooled median (`rtt_median`), else
    each flow with its own median."""
    found = [s for s in run.series if s.name == series and s.v]
    if not found:
        return []
    by_phase = phase_latency(run) if series == "rtt" else []
    if by_phase:
        out = []
        for p in by_phase:
            values = [v for s in found for t, v in zip(s.t, s.v, strict=True)
                      if math.isfinite(v) and any(a <= t < b for a, b in p.spans)]
            out.append(Samples("idle" if p.metric == "latency_idle" else LOAD, values,
                               p.text))
        return out
    pooled = stored(run, f"{series}_median")
    if pooled is not None and not phased(run):
        return [Samples("", [v for s in found for v in s.v if math.isfinite(v)],
                        f"median {figure(pooled, f'{series}_median')}")]
    return [Samples(s.flow or series, [v for v in s.v if math.isfinite(v)],
                    flow_latency(run, s)) for s in found]


def flow_state(run: RunRecord, s: Series) -> str:
    """A flow's tcp_info line (tcp.cwnd, tcp.srtt, tcp.delivery_rate...): the median
    over the load the run stored for that flow on that node, "" if none."""
    v = run.metric(s.name, flow=s.flow, node=s.node, key=s.key)
    if v is None or not math.isfinite(v):
        return ""
    return f"median {figure(v, s.name)}" + (f" ({LOAD} phase)" if phased(run) else "")
