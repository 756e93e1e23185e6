"""tcp: bulk TCP with iperf3, one or more flows, up, down (-R) or both ways (--bidir).

Each flow gets a one-off iperf3 server of its own (iperf3 serves one test at a
time) and reports every 0.2 s, from the receiver where it can (the server's
intervals, via --get-server-output, for uploads).
"""

from __future__ import annotations

from typing import Any

from hoplab.kinds.registry import DEFAULT_DURATION_S, FlowTool, Kind, Parse, Reader, register
from hoplab.lab.plan import Plan
from hoplab.run.figures import figures
from hoplab.run.flows import IPERF3_BASE_PORT, REPORT_STEP_S, Outcome, Server, address
from hoplab.run.outcome import _bulk
from hoplab.run.procs import ClientTimes
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import DIRECTIONS, Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import choice, parse_rate, parse_size, parse_str
from hoplab.tools import iperf3

OPTIONS: dict[str, Parse] = {
    "flows": ov.positive_int, "direction": choice(DIRECTIONS), "duration": ov.whole_seconds,
    "bytes": parse_size, "cport": ov.port, "affinity": ov.affinity, "congestion": parse_str,
    "tos": ov.tos, "rate": parse_rate, "length": parse_size, "family": ov.family,
}

# Figures a bulk flow gives, per flow and for the run (docs/data-format.md).
BULK_METRICS = ("goodput", "goodput_up", "goodput_down", "goodput_reverse", "sent_rate",
                "bytes_received", "retransmits", "throughput_mean", "throughput_median",
                "throughput_p5", "throughput_p95", "throughput_mean_up",
                "throughput_median_up", "throughput_p5_up", "throughput_p95_up",
                "throughput_mean_down", "throughput_median_down", "throughput_p5_down",
                "throughput_p95_down")


def bulk_flows(name: str, kind: str, src: str, dst: str, o: dict[str, Any],
               default_rate: int | None = None) -> list[Flow]:
    """The flows of a tcp or udp test: `flows` of them, each a client port and an
    affinity of its own when asked (seed 003 pins each to a core)."""
    count = o.get("flows", 1)
    affinity: tuple[str, ...] = o.get("affinity", ())
    nbytes = o.get("bytes")
    duration = None if nbytes is not None else o.get("duration", DEFAULT_DURATION_S)
    return [Flow(
        name=f"{name}.{i + 1}" if count > 1 else name, kind=kind, src=src, dst=dst,
        start_s=o.get("start", 0.0), duration_s=duration, bytes=nbytes,
        direction=o.get("direction", "up"), rate_bps=o.get("rate", default_rate),
        length=o.get("length"), cport=o["cport"] + i if "cport" in o else None,
        affinity=affinity[i % len(affinity)] if affinity else None,
        congestion=o.get("congestion"), tos=o.get("tos"), family=o.get("family", 4))
        for i in range(count)]


def _server(flow: Flow, index: int, plan: Plan) -> Server:
    port = IPERF3_BASE_PORT + index
    return Server(flow.dst, "tcp", port, iperf3.server_argv(port))


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    data, done = (None if x is None else x - t0 for x in (times.data_started,
                                                          times.output_done))
    _bulk(out, text, times.started - t0, window, data, done)


def iperf3_tool(udp: bool) -> FlowTool:
    """An iperf3 flow, TCP or UDP (-u)."""
    def client(flow: Flow, index: int, plan: Plan) -> list[str]:
        return iperf3.client_argv(iperf3.Client(
            host=address(plan, flow.dst, flow.family), port=IPERF3_BASE_PORT + index,
            duration_s=flow.duration_s, bytes=flow.bytes, udp=udp, rate_bps=flow.rate_bps,
            length=flow.length, reverse=flow.direction == "down",
            bidir=flow.direction == "bidir", cport=flow.cport, congestion=flow.congestion,
            affinity=flow.affinity, tos=flow.tos, interval_s=REPORT_STEP_S,
            ipv6=flow.family == 6, get_server_output=True))
    return FlowTool(tool="iperf3", package="iperf3", bulk=True, rtt=False,
                    media_type="application/json", server=_server, client=client,
                    collect=_collect)


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    return bulk_flows(name, "tcp", src, dst, o), []


KIND = register(Kind(
    name="tcp", options=OPTIONS, expand=_expand, figures=figures(),
    # Not sent_rate: what TCP was handed, not what arrived (metrics.py says why).
    headline=("goodput", "throughput_p5", "retransmits"),
    metrics=BULK_METRICS, flow=iperf3_tool(udp=False)))
