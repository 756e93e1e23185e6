"""The spikes of a run's RTT series in words, for `hoplab show`, the report and the
dashboard alike: when they came, how large, and the period they recur with."""

from __future__ import annotations

from hoplab.record import RunRecord, Series

# Onset times listed in full up to this many spikes; beyond, the first ones and a count.
LISTED = 12
# A spike's marker sits at its onset, as high as the RTT got within this many seconds.
MARK_SPAN_S = 1.0


def spike_lines(rec: RunRecord) -> list[str]:
    """One line per RTT series that has spikes or a verdict on them."""
    by_flow: dict[str | None, dict[str, float]] = {}
    for m in rec.metrics:
        if m.name in ("spikes", "spike_max", "spike_period", "spike_period_confidence",
                      "level_shifts"):
            by_flow.setdefault(m.flow, {})[m.name] = m.value
    onsets = {s.flow: s for s in rec.series if s.name == "rtt_spike"}
    moves = {s.flow: s for s in rec.series if s.name == "rtt_shift"}
    lines = []
    for flow, figs in by_flow.items():
        count = int(figs.get("spikes", 0))
        name = flow or "RTT"
        parts = []
        if count:
            s = onsets.get(flow)
            when = ""
            if s is not None:
                shown = ", ".join(f"{t:.1f}" for t in s.t[:LISTED])
                more = f" and {len(s.t) - LISTED} more" if len(s.t) > LISTED else ""
                when = f" at {shown}{more} s"
            parts.append(f"{count} spike{'s' if count != 1 else ''}, largest "
                         f"+{figs.get('spike_max', 0):.3g} ms{when}")
        moved = moves.get(flow)
        if moved is not None and moved.t:
            shown = ", ".join(f"{t:.1f} s ({d:+.3g} ms)" for t, d in
                              list(zip(moved.t, moved.v, strict=True))[:LISTED])
            n = len(moved.t)
            more = f" and {n - LISTED} more" if n > LISTED else ""
            parts.append(f"{n} level shift{'s' if n != 1 else ''} at {shown}{more}")
        if not parts:
            lines.append(f"{name}: no spikes above its baseline")
            continue
        text = f"{name}: " + "; ".join(parts) + "; "
        if "spike_period" in figs:
            text += (f"recurring every {figs['spike_period']:.2f} s (confidence "
                     f"{figs.get('spike_period_confidence', 0):.1f} %)")
        else:
            text += "no period"
        lines.append(text)
    return lines


def spike_marks(rtt: Series, spikes: Series) -> tuple[list[float], list[float]]:
    """Where to mark each spike on its RTT plot: at its onset, as high as the highest
    RTT within MARK_SPAN_S after it (the spike series holds sizes above the baseline,
    not heights)."""
    import bisect

    ys = []
    for t in spikes.t:
        lo = bisect.bisect_left(rtt.t, t)
        hi = bisect.bisect_right(rtt.t, t + MARK_SPAN_S)
        ys.append(max(rtt.v[lo:hi], default=0.0))
    return list(spikes.t), ys
