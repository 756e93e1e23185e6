"""RFC 2544 throughput against frame size (`hoplab plot --kind throughput`): the no-drop
rate in frames/s (left) and in Mbit/s of whole frames (right) for each frame size, a
line per run (its variant in the legend), with the generator's own ceiling a
pale band under it, so an answer at the ceiling reads as the generator's, not the path's."""

from __future__ import annotations

from collections.abc import Sequence

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


def throughput(runs: Sequence[RunRecord]) -> Figure:
    """NDR by frame size of each run; UsageError when no run has one."""
    drawn = [r for r in runs if _sizes(r)]
    if not drawn:
        raise UsageError("no run has RFC 2544 throughput figures (a test of kind "
                         "\"throughput\"); runs: " + ", ".join(str(r.id) for r in runs))
    fig = Figure(figsize=(10, 4.5))
    fps_ax, bps_ax = fig.subplots(1, 2)
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
