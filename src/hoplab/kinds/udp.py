"""udp: fixed-rate UDP with iperf3 (-u -b): the tcp kind's options, `rate` per flow
(1 Mbit/s unless given, as iperf3's own default), and the receiver's loss, jitter and
order."""

from __future__ import annotations

from typing import Any

from hoplab.kinds.registry import Kind, Reader, register
from hoplab.kinds.tcp import BULK_METRICS, OPTIONS, bulk_flows, iperf3_tool
from hoplab.run.figures import figures
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path

DEFAULT_RATE = 1_000_000
UDP_METRICS = ("loss", "udp_jitter", "out_of_order", "lost_packets", "packets")


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    return bulk_flows(name, "udp", src, dst, o, DEFAULT_RATE), []


KIND = register(Kind(
    name="udp", options=OPTIONS, expand=_expand, figures=figures(),
    headline=("goodput", "loss", "udp_jitter", "out_of_order"),
    metrics=(*BULK_METRICS, *UDP_METRICS), flow=iperf3_tool(udp=True)))
