"""Figures across runs: latency CDFs, box plots over repetitions, bars per variant."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from hoplab import metrics
from hoplab.analysis.order import variant_key
from hoplab.errors import UsageError
from hoplab.record import RunRecord
from hoplab.render import quoted
from hoplab.render.headline import HEADLINE
from hoplab.render.plot_parts import (
    decimate,
    legend,
    new_figure,
    run_label,
    unit_scale,
    variant_label,
)


def cdf(runs: Sequence[RunRecord], series: str = "rtt") -> Figure:
    """One curve per run, or per phase where the run stores a figure per phase (rrul's
    idle and loaded RTT), or per flow (quoted.distribution); each labelled with the
    stored median it is summarised by."""
    fig, (ax,) = new_figure(rows=1, height=5)
    drawn = 0
    unit = ""
    for run in runs:
        mixed = quoted.phased(run)
        for part in quoted.distribution(run, series):
            values = np.sort(np.asarray(part.values, dtype=np.float64))
            if not len(values):
                continue
            unit = next(s.unit for s in run.series if s.name == series)
            frac = np.arange(1, len(values) + 1, dtype=np.float64) / len(values)
            x, y = decimate(values, frac)
            name = " ".join(x for x in (run_label(run), part.label) if x)
            figures = [part.median] if part.median else []
            if mixed and part.label not in ("idle", quoted.LOAD):
                figures.append("all phases")        # idle and load: no figure of its own
            figures.append(f"n={len(values)}")
            ax.plot(x, y, drawstyle="steps-post", linewidth=1.5,
                    label=f"{name}: {', '.join(figures)}")
            drawn += 1
    if not drawn:
        raise UsageError(f"none of the runs has a {series!r} series")
    ax.set_xlabel(f"{series} ({unit})")
    ax.set_ylabel("fraction of samples ≤ x")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    curves = f"{drawn} curve{'s' * (drawn != 1)}"
    fig.suptitle(f"{series} CDF, {len(runs)} run{'s' * (len(runs) != 1)}"
                 + (f", {curves}" if drawn != len(runs) else ""), fontsize=11)
    legend(ax, drawn)
    return fig


def _metric_name(runs: Sequence[RunRecord], metric: str | None) -> str:
    if metric:
        return metric
    heads = HEADLINE.get(runs[0].kind, ("goodput",))
    return heads[0]


def _values(runs: Sequence[RunRecord], metric: str
            ) -> tuple[dict[tuple[Any, ...], list[float]], dict[tuple[Any, ...], dict[str, Any]],
                       str, int]:
    """Per group (test if several, then variant values): the metric of each ok run."""
    tests = {r.test for r in runs}
    groups: dict[tuple[Any, ...], list[float]] = {}
    variants: dict[tuple[Any, ...], dict[str, Any]] = {}
    unit = ""
    skipped = 0
    for run in runs:
        found = next((m for m in run.metrics if m.name == metric and m.flow is None
                      and m.node is None and m.key is None), None)
        if run.status != "ok" or found is None or not math.isfinite(found.value):
            skipped += 1
            continue
        unit = metrics.unit(metric, found.unit)
        variant = ({"test": run.test} if len(tests) > 1 else {}) | dict(run.variant)
        key = (variant_key(variant), tuple(variant))
        groups.setdefault(key, []).append(found.value)
        variants[key] = variant
    if not groups:
        raise UsageError(f"no finished run has the metric {metric!r}")
    return dict(sorted(groups.items())), variants, unit, skipped


def _tests(runs: Sequence[RunRecord]) -> str:
    tests = sorted({r.test for r in runs})
    return f" of {tests[0]}" if len(tests) == 1 else ""


def _note(skipped: int) -> str:
    return f"; {skipped} run(s) without it or not ok left out" if skipped else ""


def box(runs: Sequence[RunRecord], metric: str | None = None) -> Figure:
    name = _metric_name(runs, metric)
    groups, variants, unit, skipped = _values(runs, name)
    div, shown_unit = unit_scale([v for vs in groups.values() for v in vs], unit)
    fig, (ax,) = new_figure(rows=1, height=5)
    data = [np.asarray(vs) / div for vs in groups.values()]
    labels = [variant_label(variants[k]) for k in groups]
    parts = ax.boxplot(data, tick_labels=labels, showfliers=False)
    for line, label in zip(parts["medians"], labels, strict=True):
        line.set_gid(f"median {label}")
    for i, vs in enumerate(data, 1):
        # Every repetition as a dot: with three repetitions a box alone says little.
        spread = np.linspace(-0.08, 0.08, len(vs)) if len(vs) > 1 else np.zeros(1)
        ax.plot(i + spread, vs, linestyle="", marker="o", markersize=4, color="0.25",
                alpha=0.7)
    ax.set_ylabel(f"{metrics.label(name)} ({shown_unit})")
    ax.grid(axis="y", alpha=0.3)
    if len(labels) > 6:
        ax.tick_params(axis="x", labelrotation=30)
    flat = np.concatenate(data)
    if flat.min() > 0 and flat.max() / flat.min() > 50:
        # Variants orders of magnitude apart (a shaped link beside loopback) would
        # flatten every box but the largest to a line.
        ax.set_yscale("log")
    fig.suptitle(f"{metrics.label(name)}{_tests(runs)} per variant, {len(flat)} runs"
                 f"{_note(skipped)}",
                 fontsize=11)
    return fig


def _layout(variants: Sequence[dict[str, Any]]) -> tuple[list[str], str | None]:
    """Keys along the x axis, and the key told apart by colour (the last one that
    varies, when two or more do: hops on x, wireguard as colour)."""
    keys = list(dict.fromkeys(k for v in variants for k in v))
    varying = [k for k in keys if len({repr(v.get(k)) for v in variants}) > 1]
    if len(varying) >= 2:
        return [k for k in varying[:-1]], varying[-1]
    return varying or keys, None


def bars(runs: Sequence[RunRecord], metric: str | None = None) -> Figure:
    name = _metric_name(runs, metric)
    groups, variants, unit, skipped = _values(runs, name)
    div, shown_unit = unit_scale([v for vs in groups.values() for v in vs], unit)
    x_keys, hue = _layout([variants[k] for k in groups])
    xs: dict[str, int] = {}
    hues: dict[str, list[tuple[int, float, float, float]]] = {}
    for key, vs in groups.items():
        v = variants[key]
        x_label = variant_label({k: v.get(k) for k in x_keys})
        xi = xs.setdefault(x_label, len(xs))
        h = "" if hue is None else variant_label({hue: v.get(hue)})
        arr = np.asarray(vs) / div
        hues.setdefault(h, []).append((xi, float(np.median(arr)), float(arr.min()),
                                       float(arr.max())))
    fig, (ax,) = new_figure(rows=1, height=5)
    width = 0.8 / len(hues)
    for i, (h, rows) in enumerate(hues.items()):
        pos = np.asarray([r[0] for r in rows], dtype=np.float64) + (i - (len(hues) - 1) / 2) \
            * width
        med = np.asarray([r[1] for r in rows])
        err = np.asarray([[r[1] - r[2] for r in rows], [r[3] - r[1] for r in rows]])
        bars_ = ax.bar(pos, med, width * 0.95, yerr=err, capsize=4, label=h or None,
                       error_kw={"elinewidth": 1, "ecolor": "0.2"})
        ax.bar_label(bars_, fmt="%.3g", fontsize=7, padding=2)
    ax.set_xticks(range(len(xs)), list(xs))
    if len(xs) > 6:
        ax.tick_params(axis="x", labelrotation=30)
    ax.set_ylabel(f"{metrics.label(name)} ({shown_unit}), median with min-max")
    ax.grid(axis="y", alpha=0.3)
    if hue is not None:
        legend(ax, len(hues))
    reps = max(len(v) for v in groups.values())
    fig.suptitle(f"{metrics.label(name)}{_tests(runs)} per variant, up to {reps} repetition(s) each"
                 f"{_note(skipped)}", fontsize=11)
    return fig
