"""Several runs end to end on one time axis: one flow's bitrate through a sequence of
scenarios, like seed 004's Wireshark chart of host B's scp across its six rows.

Runs are drawn in the order given, each in its own shaded region labelled with its
test and variant; gaps between runs (set-up, pauses) are left out, so the axis is
the time the flow was measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from hoplab import kv
from hoplab.errors import UsageError
from hoplab.record import RunRecord, Series
from hoplab.render.plot_parts import decimate, new_figure
from hoplab.render.units import rate_scale


def _variant(run: RunRecord) -> str:
    return kv.pairs(dict(sorted(run.variant.items())))


def _base(run: RunRecord, flow: str) -> str:
    """A flow's name as the experiment file wrote it: without the stream number of a
    multi-stream flow (NAME.1, NAME.2...) and without the custom test's prefix."""
    head, _, tail = flow.rpartition(".")
    name = head if head and tail.isdigit() else flow
    return name.removeprefix(f"{run.test}.")


def _flow_series(run: RunRecord, flow: str) -> list[Series]:
    """The flow's throughput series, to be summed over its streams."""
    return [s for s in run.series if s.name == "throughput" and s.t and s.flow is not None
            and _base(run, s.flow) == flow]


def _common_flow(runs: Sequence[RunRecord]) -> str:
    """The one flow every run has, when there is exactly one."""
    names = [{_base(r, s.flow) for s in r.series if s.name == "throughput" and s.flow}
             for r in runs]
    common = sorted(set.intersection(*names)) if names else []
    if len(common) != 1:
        which = ", ".join(common) if common else "none"
        raise UsageError(f"--kind timeline follows one flow through the runs: give --flow NAME "
                         f"(flows in every run: {which})")
    return common[0]


def timeline(runs: Sequence[RunRecord], flow: str | None) -> Figure:
    flow = flow or _common_flow(runs)
    fig, (ax,) = new_figure(rows=1, height=4.2)
    offset = 0.0
    peak = 0.0
    parts: list[tuple[float, list[float], list[float], str]] = []
    for run in runs:
        series = _flow_series(run, flow)
        if not series:
            raise UsageError(f"run {run.id} has no throughput series of flow {flow!r}")
        t0 = min(s.t[0] for s in series)
        t1 = max(s.t[-1] for s in series)
        # Streams of one flow are sampled on one clock (the run's); sum them by time.
        grid = sorted({t for s in series for t in s.t})
        total = [sum(dict(zip(s.t, s.v, strict=True)).get(t, 0.0) for s in series)
                 for t in grid]
        peak = max(peak, max(total, default=0.0))
        parts.append((offset - t0, grid, total, f"{run.test}\n{_variant(run)}\n(run {run.id})"))
        offset += t1 - t0
    div, unit = rate_scale(peak)
    start = 0.0
    for i, (shift, grid, total, label) in enumerate(parts):
        t, v = decimate([x + shift for x in grid], total)
        ax.plot(t, v / div, color="#1f77b4", linewidth=1.2)
        end = grid[-1] + shift
        if i % 2:
            ax.axvspan(start, end, color="0.92", zorder=0)
        ax.text((start + end) / 2, 0.98, label, transform=ax.get_xaxis_transform(),
                ha="center", va="top", fontsize=8)
        start = end
    ax.set_xlim(0, start)
    ax.set_ylabel(f"{flow} throughput ({unit})")
    ax.set_xlabel("time measured, runs end to end (s)")
    ax.set_ylim(0, peak / div * 1.35)  # room for the labels above the curve
    ax.grid(alpha=0.3)
    return fig
