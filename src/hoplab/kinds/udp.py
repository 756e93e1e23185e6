"""udp: fixed-rate UDP with iperf3 (-u -b): the tcp kind's options, `rate` per flow
(1 Mbit/s unless given, as iperf3's own default), and the receiver's loss, jitter and
order."""

from __future__ import annotations

from typing import Any

from hoplab.kind_registry import Kind, Option, Reader, register
from hoplab.kinds.figures import figures
from hoplab.kinds.tcp import BULK_METRICS, bulk_flows, iperf3_tool, one_length, ports_fit
from hoplab.kinds.tcp import OPTIONS as TCP_OPTIONS
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path

DEFAULT_RATE = 1_000_000
UDP_METRICS = ("loss", "udp_jitter", "out_of_order", "lost_packets", "packets")

OPTIONS: dict[str, Option] = {
    **TCP_OPTIONS,
    "rate": Option(TCP_OPTIONS["rate"].parse, "offered rate per flow (`-b`)",
                   '`"1mbit"` (iperf3\'s)'),
    "length": Option(TCP_OPTIONS["length"].parse, "datagram size (`-l`)", "iperf3 default"),
}


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    one_length(r, o, path)
    ports_fit(r, o, path)
    return bulk_flows(name, "udp", src, dst, o, DEFAULT_RATE), []


KIND = register(Kind(
    name="udp", options=OPTIONS, expand=_expand, figures=figures(),
    headline=("goodput", "loss", "udp_jitter", "out_of_order"),
    metrics=(*BULK_METRICS, *UDP_METRICS), flow=iperf3_tool(udp=True)))
