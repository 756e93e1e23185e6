"""probe: isochronous UDP probes with irtt, VoIP-like by default (one 172-byte packet
every 20 ms, G.711 at 50 packets/s): RTT, one-way delays, IPDV and loss each way."""

from __future__ import annotations

from typing import Any

from hoplab.kinds.ping import RTT_METRICS
from hoplab.kinds.registry import DEFAULT_DURATION_S, FlowTool, Kind, Parse, Reader, register
from hoplab.lab.plan import Plan
from hoplab.run.figures import figures
from hoplab.run.flows import IRTT_BASE_PORT, Outcome, Server, address
from hoplab.run.outcome import _probe
from hoplab.run.procs import ClientTimes
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import parse_size
from hoplab.tools import irtt

OPTIONS: dict[str, Parse] = {"duration": ov.duration, "interval": ov.interval,
                             "length": parse_size, "tos": ov.tos, "family": ov.family}
PROBE_METRICS = (*RTT_METRICS, "owd_up_median", "owd_down_median", "ipdv_mean", "loss_up",
                 "loss_down")


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    return [Flow(name=name, kind="probe", src=src, dst=dst, start_s=o.get("start", 0.0),
                 duration_s=o.get("duration", DEFAULT_DURATION_S),
                 interval_s=o.get("interval", 0.02), length=o.get("length", 172),
                 tos=o.get("tos"), family=o.get("family", 4))], []


def _server(flow: Flow, index: int, plan: Plan) -> Server:
    port = IRTT_BASE_PORT + index
    return Server(flow.dst, "udp", port,
                  irtt.server_argv(address(plan, flow.dst, flow.family), port))


def _client(flow: Flow, index: int, plan: Plan) -> list[str]:
    return irtt.client_argv(irtt.Client(
        host=address(plan, flow.dst, flow.family), port=IRTT_BASE_PORT + index,
        duration_s=flow.duration_s or DEFAULT_DURATION_S, interval_s=flow.interval_s or 0.02,
        length=flow.length or 172, dscp=flow.tos, ipv6=flow.family == 6))


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    _probe(out, text, t0)


KIND = register(Kind(
    name="probe", options=OPTIONS, expand=_expand, figures=figures(probe_loss=True),
    headline=("rtt_median", "rtt_p99", "owd_up_median", "owd_down_median", "ipdv_mean",
              "loss"),
    metrics=PROBE_METRICS,
    flow=FlowTool(tool="irtt", package="irtt", bulk=False, rtt=True,
                  media_type="application/json", server=_server, client=_client,
                  collect=_collect)))
