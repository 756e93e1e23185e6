"""Overlays: several runs or groups of runs on shared axes (`hoplab plot SELECTION...
--overlay` and the dashboard's /overlay), as Flent's multi-run plots draw them: each
group's total throughput and latency over time, one colour a group, captioned from
its labels. This module says what is drawn (the groups, their captions, the lines);
plots_overlay.py draws it with matplotlib, charts_overlay.py as a plotly figure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hoplab.analysis.order import natural_key
from hoplab.errors import UsageError
from hoplab.record import RunRecord, Series

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
          "#e377c2")
MAX_GROUPS = len(COLORS)


@dataclass(frozen=True)
class Group:
    caption: str                     # what tells it from the others: "qos=on"
    selection: str                   # as typed
    runs: tuple[RunRecord, ...]


def _facts(run: RunRecord) -> dict[str, str]:
    """What a caption may name: the experiment, test, variant and labels of a run."""
    out = {"experiment": run.experiment, "test": run.test}
    out.update({k: str(v) for k, v in run.variant.items()})
    out.update({k: str(v) for k, v in run.labels.items()})
    return out


def _common(runs: Sequence[RunRecord]) -> dict[str, str]:
    """The facts every run of `runs` shares."""
    facts = [_facts(r) for r in runs]
    return {k: v for k, v in facts[0].items() if all(f.get(k) == v for f in facts[1:])}


def _by_test(selections: Sequence[tuple[str, Sequence[RunRecord]]]
             ) -> list[tuple[str, Sequence[RunRecord]]]:
    """Each selection split by test where the runs hold more than one: a tcp-up run and
    an rrul run on one time axis are not one thing, and each line says its test."""
    tests = sorted({r.test for _, runs in selections for r in runs}, key=natural_key)
    if len(tests) < 2:
        return list(selections)
    return [(f"{spec},test={t}", mine) for spec, runs in selections for t in tests
            if (mine := [r for r in runs if r.test == t])]


def groups_of(selections: Sequence[tuple[str, Sequence[RunRecord]]]
              ) -> tuple[str, list[Group]]:
    """The groups to overlay, each captioned by the facts its runs share that set it
    apart from the other groups (qos=on; version=v45 device=ap1), else by its
    selection; and the title: what all of them share. UsageError for more groups than
    colours, a group without runs, or one run in two groups."""
    selections = _by_test(selections)
    if len(selections) > MAX_GROUPS:
        raise UsageError(f"{len(selections)} selections: an overlay draws at most "
                         f"{MAX_GROUPS}, one colour each")
    seen: dict[int | None, str] = {}
    for spec, runs in selections:
        if not runs:
            raise UsageError(f"selection {spec!r} holds no runs")
        for r in runs:
            if r.id in seen and r.id is not None:
                raise UsageError(f"run {r.id} is in both {seen[r.id]!r} and {spec!r}: an "
                                 "overlay's groups must not share runs")
            seen[r.id] = spec
    shared = [_common(runs) for _, runs in selections]
    everywhere = {k: v for k, v in shared[0].items() if all(s.get(k) == v for s in shared)}
    groups = []
    for (spec, runs), own in zip(selections, shared, strict=True):
        apart = [f"{k}={v}" for k, v in sorted(own.items(), key=lambda kv: natural_key(kv[0]))
                 if k not in everywhere]
        n = len(runs)
        caption = (" ".join(apart) or spec) + (f" ({n} runs)" if n > 1 else
                                               f" (run {runs[0].id})")
        groups.append(Group(caption, spec, tuple(runs)))
    title = " ".join(f"{k}={v}" for k, v in everywhere.items()) or "runs"
    return title, groups


def total_rate(run: RunRecord) -> Series | None:
    """The run's total throughput over time: its total series (no flow, no direction),
    else the first total by direction; None without one."""
    totals = [s for s in run.series if s.name == "throughput" and s.flow is None and s.t]
    return next((s for s in totals if s.key is None), totals[0] if totals else None)


def latency(run: RunRecord) -> Series | None:
    """The run's RTT over time: its ping stream if it has one, else its first RTT series
    in natural order of flow names."""
    rtts = sorted((s for s in run.series if s.name == "rtt" and s.t),
                  key=lambda s: natural_key(s.flow or ""))
    pings = [s for s in rtts if s.flow and s.flow.endswith("ping")]
    return pings[0] if pings else (rtts[0] if rtts else None)


def panels(groups: Sequence[Group]) -> list[tuple[str, Any]]:
    """The panels the groups have something for: throughput, latency, or both."""
    runs = [r for g in groups for r in g.runs]
    found = [(name, pick) for name, pick in (("throughput", total_rate), ("latency", latency))
             if any(pick(r) is not None for r in runs)]
    if not found:
        raise UsageError("none of the selected runs has a throughput or RTT series to "
                         "overlay")
    return found
