"""RFC 2544 throughput against frame size (`hoplab plot --kind throughput`): the no-drop
rate in frames/s (left) and in Mbit/s of whole frames (right) for each frame size, a
line per run (its variant in the legend), with the generator's own ceiling a
pale band under it, so an answer at the ceiling reads as the generator's, not the path's;
and, where a run has one, RFC 2544's frame loss curve: loss against the offered load, a
line per frame size."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hoplab import kv
from hoplab.errors import UsageError
from hoplab.record import RunRecord

_SIZE_ORDER = {"imix": 10_000}
CEILING_WIDTH = 9.0


def _sizes(run: RunRecord) -> list[str]:
    keys = {m.key for m in run.metrics
            if m.name == "ndr_fps" and m.key and m.flow is None and m.node is None}
    return sorted(keys, key=lambda k: _SIZE_ORDER.get(k, int(k) if k.isdigit() else 9_999))


def over_mtu(run: RunRecord) -> dict[str, float]:
    """The sizes whose frames did not fit the path, and its MTU."""
    return {m.key: m.value for m in run.metrics
            if m.name == "frame_over_mtu" and m.key and m.flow is None and m.node is None}


def _over_mtu(run: RunRecord, axes: Sequence[Axes], colour: str) -> None:
    """A cross at 0 for each size that does not fit, saying so: no rate, not a 0."""
    for key, mtu in over_mtu(run).items():
        for ax in axes:
            ax.plot([key], [0], marker="x", ms=9, color=colour, linestyle="none")
            ax.annotate(f"does not fit {mtu:.0f}", (key, 0), xytext=(0, 10),
                        textcoords="offset points", rotation=90, ha="center", va="bottom",
                        fontsize="small", color=colour)


def _curve(run: RunRecord) -> dict[str, list[tuple[float, float]]]:
    """RFC 2544's frame loss curve of a run: {size: [(percent of the maximum, loss %)]}."""
    out: dict[str, list[tuple[float, float]]] = {}
    for m in run.metrics:
        if m.name == "frame_loss" and m.key and m.flow is None and m.node is None:
            size, _, pct = m.key.rpartition(" ")
            out.setdefault(size, []).append((float(pct.rstrip("%")), m.value))
    return {k: sorted(v) for k, v in out.items()}


def _loss_curves(ax: Axes, runs: Sequence[RunRecord]) -> None:
    for run in runs:
        label = f"run {run.id} {kv.pairs(run.variant)}".strip()
        for size, points in _curve(run).items():
            ax.plot([p for p, _ in points], [v for _, v in points], marker="o",
                    label=f"{label}, {size} B")
    ax.set(xlabel="offered load (% of the generator's ceiling)", ylabel="frame loss (%)",
           title="frame loss rate (RFC 2544 26.3)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def throughput(runs: Sequence[RunRecord]) -> Figure:
    """NDR by frame size of each run; UsageError when no run has one."""
    drawn = [r for r in runs if _sizes(r) or over_mtu(r)]
    if not drawn:
        raise UsageError("no run has RFC 2544 throughput figures (a test of kind "
                         "\"throughput\"); runs: " + ", ".join(str(r.id) for r in runs))
    curves = [r for r in drawn if _curve(r)]
    fig = Figure(figsize=(15 if curves else 10, 4.5))
    axes = fig.subplots(1, 3 if curves else 2)
    fps_ax, bps_ax = axes[0], axes[1]
    if curves:
        _loss_curves(axes[2], curves)
    for run in drawn:
        sizes = _sizes(run)
        label = f"run {run.id} {kv.pairs(run.variant)}".strip()
        fps = [run.metric("ndr_fps", key=k) or 0.0 for k in sizes]
        bps = [(run.metric("ndr_bps", key=k) or 0.0) / 1e6 for k in sizes]
        ceiling = [run.metric("generator_fps", key=k) or 0.0 for k in sizes]
        line = fps_ax.plot(sizes, fps, marker="o", label=label, zorder=3)[0]
        # A wide pale band under the result: an answer at the ceiling (a generator-limited
        # one) lies inside it and both stay visible, where a thin line hid under it.
        fps_ax.plot(sizes, ceiling, color=line.get_color(), alpha=0.25, lw=CEILING_WIDTH,
                    solid_capstyle="round", zorder=2, label=f"{label}: generator's ceiling")
        bps_ax.plot(sizes, bps, marker="o", color=line.get_color(), label=label)
        _over_mtu(run, (fps_ax, bps_ax), line.get_color())
    fps_ax.set(xlabel="frame size (bytes, FCS included)", ylabel="no-drop rate (frames/s)",
               title="NDR, frames/s")
    bps_ax.set(xlabel="frame size (bytes, FCS included)", ylabel="no-drop rate (Mbit/s)",
               title="NDR, Mbit/s of whole frames")
    for ax in (fps_ax, bps_ax):
        # Linear from zero: on a log axis spanning 2.2-2.34 x 10^5 a 6 % spread looked
        # like a cliff.
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    fps_ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
