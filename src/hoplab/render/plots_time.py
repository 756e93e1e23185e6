"""Figures of one run over time: throughput and latency, ping streams, per-core CPU, TCP
flows' own state (tcp_info)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from hoplab.analysis.order import natural_key
from hoplab.errors import UsageError
from hoplab.record import RunRecord, Series
from hoplab.render import quoted
from hoplab.render.plot_parts import (
    decimate,
    draw_phase_latency,
    draw_phases,
    keep,
    legend,
    new_figure,
    run_title,
)
from hoplab.render.spike_text import spike_marks
from hoplab.render.units import rate_scale

CPU_PARTS = ("user", "system", "irq", "softirq")
CPU_COLORS = ("#4878d0", "#ee854a", "#d65f5f", "#956cb4")
MAX_CORES = 16


def _named(name: str, figures: str) -> str:
    """A legend entry: the line's name, then the stored figures it is quoted by."""
    return f"{name}: {figures}" if figures else name


def _flow_name(s: Series) -> str:
    name = s.flow or "total"
    return f"{name} ({s.key})" if s.key else name


def timeseries(run: RunRecord) -> Figure:
    rates = [s for s in run.series if s.name == "throughput" and s.t]
    rtts = [s for s in run.series if s.name == "rtt" and s.t]
    if not rates and not rtts:
        raise UsageError(f"run {run.id} has no throughput or RTT series to draw")
    fig, axes = new_figure(rows=int(bool(rates)) + int(bool(rtts)), height=3.6)
    fig.suptitle(run_title(run), fontsize=11)
    ax_iter = iter(axes)
    if rates:
        ax = next(ax_iter)
        div, unit = rate_scale(max(max(s.v, default=0.0) for s in rates))
        flows = [s for s in rates if s.flow is not None]
        totals = [s for s in rates if s.flow is None]
        for s in flows:
            t, v = decimate(s.t, s.v)
            ax.plot(t, v / div, linewidth=1, alpha=0.85,
                    label=_named(_flow_name(s), quoted.flow_rate(run, s)))
        for s in totals:
            t, v = decimate(s.t, s.v)
            label = _named(f"total{f' {s.key}' if s.key else ''}", quoted.total(run, s.key))
            style = {None: "-", "up": "--"}.get(s.key, ":")
            ax.plot(t, v / div, color="black" if s.key is None else "0.35", linewidth=2.2,
                    linestyle=style, label=label)
        ax.set_ylabel(f"throughput ({unit})")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        legend(ax, len(flows) + len(totals))
    if rtts:
        ax = next(ax_iter)
        for s in rtts:
            t, v = decimate(s.t, s.v)
            ax.plot(t, v, linewidth=1, label=_named(_flow_name(s), quoted.flow_latency(run, s)))
        marks = draw_phase_latency(ax, quoted.phase_latency(run))
        ax.set_ylabel("RTT (ms)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        legend(ax, len(rtts) + marks)
    axes[-1].set_xlabel("time since the run started (s)")
    draw_phases(axes, run)
    return fig


def _stream_label(run: RunRecord, flow: str | None) -> str:
    """A ping stream as ping-exp names it: by destination and TOS, when the run says."""
    test = run.metadata.get("test") if isinstance(run.metadata, dict) else None
    flows: list[dict[str, Any]] = (test or {}).get("flows") or [] if isinstance(test, dict) \
        else []
    spec = next((f for f in flows if isinstance(f, dict) and f.get("name") == flow), None)
    name = flow or "ping"
    if spec is None:
        return name
    extra = [f"to {spec['dst']}"] if spec.get("dst") else []
    if spec.get("tos") is not None:
        extra.append(f"TOS {int(spec['tos']):#04x}")
    return f"{name} ({', '.join(extra)})" if extra else name


def ping(run: RunRecord, style: str = "lines") -> Figure:
    if style not in ("lines", "points"):
        raise UsageError(f"--style {style!r}: lines or points")
    rtts = [s for s in run.series if s.name == "rtt" and s.t]
    if not rtts:
        raise UsageError(f"run {run.id} has no RTT series (ping or probe streams)")
    lost = {s.flow: s for s in run.series if s.name == "lost" and s.t}
    marks = {s.flow: s for s in run.series if s.name == "rtt_spike" and s.t}
    shifts = {s.flow: s for s in run.series if s.name == "rtt_shift" and s.t}
    fig, (ax,) = new_figure(rows=1, height=5)
    fig.suptitle(run_title(run), fontsize=11)
    entries = 0
    for s in rtts:
        t, v = decimate(s.t, s.v)
        label = _named(_stream_label(run, s.flow),
                       ", ".join(x for x in (quoted.flow_latency(run, s), f"n={len(s.v)}") if x))
        if style == "lines":
            (line,) = ax.plot(t, v, linewidth=1, label=label)
        else:
            (line,) = ax.plot(t, v, linestyle="", marker=".", markersize=3, label=label)
        entries += 1
        for events, marker, what in ((marks.get(s.flow), "v", "spikes"),
                                     (shifts.get(s.flow), "D", "level shifts")):
            if events is not None:
                st, sy = spike_marks(s, events)
                ax.plot(st, sy, linestyle="", marker=marker, markersize=6, color="#d62728",
                        label=f"{what} ({len(st)})")
                entries += 1
        gone = lost.get(s.flow)
        if gone is not None:
            ax.plot(gone.t, [0.0] * len(gone.t), linestyle="", marker="x", markersize=5,
                    color=line.get_color(), label=f"lost ({len(gone.t)})")
            entries += 1
    entries += draw_phase_latency(ax, quoted.phase_latency(run))
    ax.set_ylabel("RTT (ms)")
    ax.set_xlabel("time since the run started (s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    legend(ax, entries)
    draw_phases([ax], run)
    return fig


def cpu(run: RunRecord) -> Figure:
    parts = {(s.name.removeprefix("cpu."), s.node, s.key): s for s in run.series
             if s.name.startswith("cpu.") and s.t}
    cores = sorted({(node, key) for name, node, key in parts if name == "user"},
                   key=lambda nk: (natural_key(nk[0] or ""), natural_key(nk[1] or "")))
    per_core = [c for c in cores if c[1] != "all"] or cores
    if not per_core:
        raise UsageError(f"run {run.id} has no CPU series (cpu.user, cpu.system, ...)")
    shown = per_core[:MAX_CORES]
    fig, axes = new_figure(rows=len(shown), height=2.2)
    more = f"; {len(per_core) - len(shown)} more cores not shown" if len(per_core) > len(
        shown) else ""
    fig.suptitle(f"{run_title(run)}: CPU per core{more}", fontsize=11)
    for ax, (node, key) in zip(axes, shown, strict=True):
        base = parts[("user", node, key)]
        t = np.asarray(base.t, dtype=np.float64)
        layers = []
        for name in CPU_PARTS:
            s = parts.get((name, node, key))
            # Samplers read every part at once; interpolate only if a part's clock differs.
            layers.append(np.zeros_like(t) if s is None else
                          np.asarray(s.v, dtype=np.float64) if s.t == base.t else
                          np.interp(t, s.t, s.v))
        total = np.sum(layers, axis=0)
        idx = keep(total)
        ax.stackplot(t[idx], *[layer[idx] for layer in layers], labels=CPU_PARTS,
                     colors=CPU_COLORS, alpha=0.9)
        ax.plot(t[idx], total[idx], color="black", linewidth=0.8, label="busy (sum)")
        ax.set_ylim(0, max(100.0, float(total.max(initial=0.0)) * 1.05))
        ax.set_ylabel(f"{node or ''} {key or ''}\n%".strip(), fontsize=9)
        ax.grid(alpha=0.3)
        mean_busy = float(np.mean(total)) if len(total) else 0.0
        ax.text(0.005, 0.96, f"{node} {key}: mean busy {mean_busy:.1f} %", fontsize=8,
                transform=ax.transAxes, va="top",
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel("time since the run started (s)")
    draw_phases(axes, run)
    return fig


# tcp_info's panels: (series, axis label); rates are scaled to the largest.
TCP_PANELS = (("tcp.cwnd", "cwnd (segments)"), ("tcp.srtt", "smoothed RTT (ms)"),
              ("tcp.delivery_rate", "delivery rate"))


def _sender_name(s: Series) -> str:
    """A flow's line: its name, and where it was read (a --bidir flow has two senders)."""
    where = f"{s.node}, {s.key}" if s.key else s.node
    return f"{s.flow} @ {where}" if where else str(s.flow)


def tcpinfo(run: RunRecord) -> Figure:
    """Each TCP flow's cwnd, smoothed RTT (with the least RTT it saw, dashed) and
    delivery rate over time, as the tcp_info sampler read them on its sender."""
    by = {name: [s for s in run.series if s.name == name and s.flow is not None and s.t]
          for name, _ in (*TCP_PANELS, ("tcp.min_rtt", ""))}
    if not any(by[name] for name, _ in TCP_PANELS):
        raise UsageError(f"run {run.id} has no tcp_info series (tcp.cwnd, tcp.srtt, "
                         f"tcp.delivery_rate): the tcp_info sampler reads TCP flows' "
                         f"senders on namespaces, where a test's samplers include it")
    fig, axes = new_figure(rows=len(TCP_PANELS), height=2.8)
    fig.suptitle(f"{run_title(run)}: TCP state per flow", fontsize=11)
    for ax, (name, label) in zip(axes, TCP_PANELS, strict=True):
        lines = by[name]
        div, unit = (rate_scale(max(max(s.v) for s in lines)) if lines else (1.0, "bit/s")) \
            if name == "tcp.delivery_rate" else (1.0, "")
        colors = {}
        for s in lines:
            t, v = decimate(s.t, s.v)
            (line,) = ax.plot(t, v / div, linewidth=1,
                              label=_named(_sender_name(s), quoted.flow_state(run, s)))
            colors[(s.flow, s.node, s.key)] = line.get_color()
        entries = len(lines)
        if name == "tcp.srtt":
            for s in by["tcp.min_rtt"]:
                color = colors.get((s.flow, s.node, s.key))
                if color is not None:
                    ax.plot(s.t, s.v, linewidth=0.8, linestyle="--", color=color,
                            label=f"{_sender_name(s)}: least RTT")
                    entries += 1
        ax.set_ylabel(f"{label} ({unit})" if unit else label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        legend(ax, entries)
    axes[-1].set_xlabel("time since the run started (s)")
    draw_phases(axes, run)
    return fig
