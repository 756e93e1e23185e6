"""One-way delays where a flow's two ends keep different clocks.

irtt's send delay is the server's receive time (its clock) minus the client's send
time (the client's clock), its receive delay the other way round. Ends on one
machine share its clock. When an end is a device, each delay carries the offset
between the two clocks: measured up = true up + (server offset - client offset),
measured down = true down - (the same). hoplab measures each device's offset for
the run (hoplab.nodes.clock, stored as the run's `clocks`) and takes it out.

The correction is only as good as the offsets' uncertainty. A one-way figure is kept
only where that uncertainty is below its precision, taken as a tenth of the flow's
median RTT: on a path of 70 ms, offsets known to 7 ms; on a LAN of 1 ms, to 0.1 ms,
which an SSH exchange cannot give. Otherwise the run keeps RTT only and says why
(its metadata `one_way`, shown by `hoplab show`), never a figure off by the clocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoplab.analysis.stats import percentile
from hoplab.record import Metric, Series
from hoplab.spec.experiment import Flow

# The share of the median RTT the clocks' uncertainty must stay under.
PRECISION_OF_RTT = 0.1
_SIGN = {"owd_up": -1.0, "owd_down": 1.0}   # how the offset difference is taken out


def _clock(node: str, machine: str, clocks: Mapping[str, Mapping[str, Any]]
           ) -> tuple[float, float] | str:
    """(offset, uncertainty) in seconds of node's clock against this machine's, or why
    it is not known."""
    if machine == "local":
        return 0.0, 0.0
    got = clocks.get(node)
    if got is None:
        return f"the clock of {node} was not measured"
    if "error" in got:
        return f"the clock of {node} could not be read: {got['error']}"
    return float(got["offset_s"]), float(got["uncertainty_s"])


def _rtt_median(metrics: Sequence[Metric], flow: str) -> float | None:
    return next((m.value for m in metrics if m.name == "rtt_median" and m.flow == flow
                 and m.node is None), None)


def gate(flows: Sequence[Flow], machines: Mapping[str, str],
         clocks: Mapping[str, Mapping[str, Any]], metrics: list[Metric],
         series: list[Series]) -> dict[str, str]:
    """Corrects or drops, in place, the one-way series and their medians of every flow
    whose ends are on different machines; returns, per such flow, what was done."""
    said: dict[str, str] = {}
    for flow in flows:
        owd = [s for s in series if s.flow == flow.name and s.name in _SIGN]
        client, server = machines.get(flow.src, "local"), machines.get(flow.dst, "local")
        if not owd or client == server:
            continue
        client_clock = _clock(flow.src, client, clocks)
        server_clock = _clock(flow.dst, server, clocks)
        rtt = _rtt_median(metrics, flow.name)
        delta = unc = 0.0
        if isinstance(client_clock, str) or isinstance(server_clock, str):
            reason: str | None = (client_clock if isinstance(client_clock, str)
                                  else str(server_clock))
        else:
            delta, unc = server_clock[0] - client_clock[0], server_clock[1] + client_clock[1]
            reason = None
            if rtt is None or unc * 1000 >= PRECISION_OF_RTT * rtt:
                reason = (f"the clocks of {flow.src} and {flow.dst} are known to +-"
                          f"{unc * 1000:.2f} ms, not below a tenth of the median RTT ("
                          f"{'none' if rtt is None else f'{rtt:.2f} ms'})")
        if reason is not None:
            names = {f"{s.name}_median" for s in owd}
            series[:] = [s for s in series if not (s.flow == flow.name and s.name in _SIGN)]
            metrics[:] = [m for m in metrics if not (m.flow == flow.name and m.name in names)]
            said[flow.name] = f"RTT only: {reason}"
            continue
        for s in owd:
            s.v = [v + _SIGN[s.name] * delta * 1000 for v in s.v]
            for m in metrics:
                if m.flow == flow.name and m.name == f"{s.name}_median" and m.node is None:
                    m.value = percentile(s.v, 50)
        said[flow.name] = (f"one-way delays corrected by the clocks' offset, {delta * 1000:+.2f}"
                           f" ms ({flow.dst} minus {flow.src}), known to +-{unc * 1000:.2f} ms")
    return said
