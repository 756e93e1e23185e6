"""probe: isochronous UDP probes with irtt, VoIP-like by default (one 172-byte packet
every 20 ms, G.711 at 50 packets/s): RTT, one-way delays, IPDV and loss each way.
irtt reports Unix times per packet, shifted here by clock zero; delays are kept in
milliseconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hoplab.analysis.stats import mean, percentile
from hoplab.kind_registry import DEFAULT_DURATION_S, FlowTool, Kind, Option, Reader, register
from hoplab.kinds.figures import figures, latency_metrics, rtt_series
from hoplab.kinds.flow import ClientTimes, Outcome, Server, address
from hoplab.kinds.ping import RTT_METRICS
from hoplab.lab.plan import Plan
from hoplab.metrics import loss_percent
from hoplab.record import Metric, Series
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import parse_size
from hoplab.tools import irtt

IRTT_BASE_PORT = 2112

OPTIONS: dict[str, Option] = {
    "duration": Option(ov.duration, "how long the probe runs", '`"10s"`'),
    "interval": Option(ov.interval, "time between packets", '`"20ms"`'),
    "length": Option(parse_size, "packet length (bytes); with the interval, a G.711 VoIP "
                                 "call", "172"),
    "tos": Option(ov.tos, "DSCP/TOS (`--dscp`)"),
    "family": Option(ov.family, "4 or 6", "4"),
}
PROBE_METRICS = (*RTT_METRICS, "owd_up_median", "owd_down_median", "ipdv_mean", "loss_up",
                 "loss_down")


@dataclass(frozen=True)
class ProbeOptions:
    """A probe flow's own options."""

    interval_s: float = 0.02
    length: int = 172
    tos: int | None = None


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    return [Flow(name=name, kind="probe", src=src, dst=dst, start_s=o.get("start", 0.0),
                 duration_s=o.get("duration", DEFAULT_DURATION_S), family=o.get("family", 4),
                 options=ProbeOptions(interval_s=o.get("interval", 0.02),
                                      length=o.get("length", 172), tos=o.get("tos")))], []


def _server(flow: Flow, index: int, plan: Plan) -> Server:
    port = IRTT_BASE_PORT + index
    return Server(flow.dst, "udp", port,
                  irtt.server_argv(address(plan, flow.dst, flow.family), port))


def _client(flow: Flow, index: int, plan: Plan) -> list[str]:
    o = flow.options_as(ProbeOptions)
    return irtt.client_argv(irtt.Client(
        host=address(plan, flow.dst, flow.family), port=IRTT_BASE_PORT + index,
        duration_s=flow.duration_s or DEFAULT_DURATION_S, interval_s=o.interval_s or 0.02,
        length=o.length or 172, dscp=o.tos, ipv6=flow.family == 6))


def collect_probe(out: Outcome, text: str, t0: float) -> None:
    res = irtt.parse(text)
    name = out.flow.name
    answered = [s for s in res.samples if s.rtt_s is not None]
    rtt_series(out, [s.t_unix - t0 for s in answered],
               [(s.rtt_s or 0.0) * 1000 for s in answered])
    for attr, key in (("send_delay_s", "owd_up"), ("receive_delay_s", "owd_down"),
                      ("ipdv_s", "ipdv")):
        pts = [(s.t_unix - t0, getattr(s, attr) * 1000) for s in answered
               if getattr(s, attr) is not None]
        if pts:
            out.series.append(Series(key, "ms", [p[0] for p in pts], [p[1] for p in pts],
                                     flow=name))
            values = [p[1] for p in pts]
            if key == "ipdv":
                out.metrics.append(Metric("ipdv_mean", mean([abs(x) for x in values]), "ms",
                                          flow=name))
            else:
                out.metrics.append(Metric(f"{key}_median", percentile(values, 50), "ms",
                                          flow=name))
    out.metrics += latency_metrics(out.rtt_ms, name)
    out.packets = (res.packets_sent, res.packets_received)
    out.metrics += [Metric("loss", loss_percent(*out.packets), "%", flow=name),
                    Metric("packets", float(res.packets_sent), "count", flow=name)]
    # Each way by its own sender's count: the client's requests up, the server's replies
    # (one per request it received) down.
    at_server = res.server_packets_received
    if at_server is not None:
        out.metrics += [
            Metric("loss_up", loss_percent(res.packets_sent, at_server), "%", flow=name),
            Metric("loss_down", loss_percent(at_server, res.packets_received), "%",
                   flow=name)]


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    collect_probe(out, text, t0)


KIND = register(Kind(
    name="probe", options=OPTIONS, expand=_expand, figures=figures(probe_loss=True),
    headline=("rtt_median", "rtt_p99", "owd_up_median", "owd_down_median", "ipdv_mean",
              "loss"),
    metrics=PROBE_METRICS,
    flow=FlowTool(tool="irtt", bulk=False, rtt=True,
                  media_type="application/json", server=_server, client=_client,
                  collect=_collect)))
