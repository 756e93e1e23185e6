"""ping: ICMP echo streams (iputils ping -D -O), one or several at once with their own
TOS, interval, size and target (ping-exp's streams, seed 004)."""

from __future__ import annotations

from typing import Any

from hoplab.kinds.registry import DEFAULT_DURATION_S, FlowTool, Kind, Parse, Reader, register
from hoplab.lab.plan import Plan
from hoplab.run.figures import figures
from hoplab.run.flows import Outcome, address
from hoplab.run.outcome import _ping
from hoplab.run.procs import ClientTimes
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import parse_size, parse_str
from hoplab.tools import ping

OPTIONS: dict[str, Parse] = {"duration": ov.duration, "interval": ov.interval,
                             "size": parse_size, "tos": ov.tos, "family": ov.family,
                             "streams": lambda v: v}
_STREAM_KEYS: dict[str, Parse] = {"name": parse_str, "to": parse_str, "tos": ov.tos,
                                  "interval": ov.interval, "size": parse_size,
                                  "family": ov.family}
# What a stream of RTT samples gives, per flow and pooled for the run.
RTT_METRICS = ("rtt_min", "rtt_median", "rtt_mean", "rtt_p95", "rtt_p99", "rtt_max",
               "rtt_jitter", "loss", "packets")


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    base = dict(start_s=o.get("start", 0.0), duration_s=o.get("duration", DEFAULT_DURATION_S),
                interval_s=o.get("interval", 0.2), size=o.get("size", 56), tos=o.get("tos"),
                family=o.get("family", 4))
    streams = o.get("streams")
    if streams is None:
        return [Flow(name=name, kind="ping", src=src, dst=dst, **base)], []
    flows = []
    for i, raw in enumerate(r.ctx.array(streams, (*path, "streams"))):
        where = (*path, "streams", i)
        s = r.options(raw, where, _STREAM_KEYS)
        target = r.node((*where, "to"), s["to"]) if "to" in s else dst
        tos = s.get("tos", base["tos"])
        label = s.get("name") or (f"tos{tos:#04x}" if tos is not None else f"to-{target}")
        flows.append(Flow(name=f"{name}.{label}", kind="ping", src=src, dst=target, **{
            **base, "tos": tos, "interval_s": s.get("interval", base["interval_s"]),
            "size": s.get("size", base["size"]), "family": s.get("family", base["family"])}))
    names = [f.name for f in flows]
    for i, n in enumerate(names):
        if n in names[:i]:
            r.ctx.fail((*path, "streams", i), f"two streams are both named '{n}'; "
                                              f"give each a name")
    return flows, []


def _client(flow: Flow, index: int, plan: Plan) -> list[str]:
    return ping.argv(ping.Stream(
        host=address(plan, flow.dst, flow.family), interval_s=flow.interval_s or 0.2,
        duration_s=flow.duration_s, size=flow.size or 56, tos=flow.tos,
        ipv6=flow.family == 6))


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    _ping(out, text, t0)


KIND = register(Kind(
    name="ping", options=OPTIONS, expand=_expand, figures=figures(probe_loss=True),
    headline=("rtt_median", "rtt_p95", "rtt_max", "loss", "rtt_jitter"),
    metrics=RTT_METRICS,
    flow=FlowTool(tool="ping", package="iputils-ping", bulk=False, rtt=True,
                  media_type="text/plain", server=lambda _f, _i, _p: None, client=_client,
                  collect=_collect)))
