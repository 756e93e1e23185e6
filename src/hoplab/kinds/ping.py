"""ping: ICMP echo streams (iputils ping -D -O), one or several at once with their own
TOS, interval, size and target (ping-exp's streams, seed 004). ping -D reports Unix
times per echo, shifted here by clock zero; RTTs are kept in milliseconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hoplab.kind_registry import (
    DEFAULT_DURATION_S,
    MAX_TEST_FLOWS,
    FlowTool,
    Kind,
    Option,
    Parse,
    Reader,
    register,
)
from hoplab.kinds.figures import figures, latency_metrics, rtt_series
from hoplab.kinds.flow import ClientTimes, Outcome, address
from hoplab.lab.plan import Plan
from hoplab.metrics import loss_percent
from hoplab.record import Metric, Series
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import parse_size, parse_str
from hoplab.tools import ping

OPTIONS: dict[str, Option] = {
    "duration": Option(ov.duration, "how long each stream runs", '`"10s"`'),
    "interval": Option(ov.interval, "time between echoes (at least 2 ms)", '`"200ms"`'),
    "size": Option(parse_size, "payload bytes", "56"),
    "tos": Option(ov.tos, "TOS byte (`ping -Q`)"),
    "family": Option(ov.family, "4 or 6", "4"),
    "streams": Option(lambda v: v, "several streams at once, as ping-exp does (seed 004): an "
                                   "array of tables with `name`, `to`, `tos`, `interval`, "
                                   "`size`, `family`; unset keys come from the test", "one"),
}
_STREAM_KEYS: dict[str, Parse] = {"name": parse_str, "to": parse_str, "tos": ov.tos,
                                  "interval": ov.interval, "size": parse_size,
                                  "family": ov.family}
# What a stream of RTT samples gives, per flow and pooled for the run.
RTT_METRICS = ("rtt_min", "rtt_median", "rtt_mean", "rtt_p95", "rtt_p99", "rtt_max",
               "rtt_jitter", "loss", "packets")


@dataclass(frozen=True)
class PingOptions:
    """A ping stream's own options."""

    interval_s: float = 0.2
    size: int = 56
    tos: int | None = None


def _stream(name: str, src: str, dst: str, start_s: float, duration_s: float,
           family: int, options: PingOptions) -> Flow:
    """One ping stream."""
    return Flow(name=name, kind="ping", src=src, dst=dst, start_s=start_s,
                duration_s=duration_s, family=family, options=options)


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    start, duration = o.get("start", 0.0), o.get("duration", DEFAULT_DURATION_S)
    base = PingOptions(interval_s=o.get("interval", 0.2), size=o.get("size", 56),
                       tos=o.get("tos"))
    family = o.get("family", 4)
    streams = o.get("streams")
    if streams is None:
        return [_stream(name, src, dst, start, duration, family, base)], []
    flows = []
    raw_streams = r.ctx.array(streams, (*path, "streams"))
    if len(raw_streams) > MAX_TEST_FLOWS:
        r.ctx.fail((*path, "streams"), f"{len(raw_streams)} streams; a test has at most "
                                       f"{MAX_TEST_FLOWS} flows, which run together")
    for i, raw in enumerate(raw_streams):
        where = (*path, "streams", i)
        s = r.options(raw, where, _STREAM_KEYS)
        target = r.node((*where, "to"), s["to"]) if "to" in s else dst
        tos = s.get("tos", base.tos)
        label = s.get("name") or (f"tos{tos:#04x}" if tos is not None else f"to-{target}")
        flows.append(_stream(f"{name}.{label}", src, target, start, duration,
                            s.get("family", family), PingOptions(
                                interval_s=s.get("interval", base.interval_s),
                                size=s.get("size", base.size), tos=tos)))
    names = [f.name for f in flows]
    for i, n in enumerate(names):
        if n in names[:i]:
            r.ctx.fail((*path, "streams", i), f"two streams are both named '{n}'; "
                                              f"give each a name")
    return flows, []


def _client(flow: Flow, index: int, plan: Plan) -> list[str]:
    o = flow.options_as(PingOptions)
    return ping.argv(ping.Stream(
        host=address(plan, flow.dst, flow.family), interval_s=o.interval_s or 0.2,
        duration_s=flow.duration_s, size=o.size or 56, tos=o.tos,
        ipv6=flow.family == 6))


def collect_ping(out: Outcome, text: str, t0: float) -> None:
    res = ping.parse(text)
    answered = [r for r in res.replies if r.rtt_s is not None]
    lost = [r.t_unix - t0 for r in res.replies if r.rtt_s is None]
    rtt_series(out, [r.t_unix - t0 for r in answered],
               [(r.rtt_s or 0.0) * 1000 for r in answered])
    if lost:
        out.series.append(Series("lost", "count", lost, [1.0] * len(lost), flow=out.flow.name))
    out.metrics += latency_metrics(out.rtt_ms, out.flow.name)
    out.packets = (res.sent, res.received)
    out.metrics += [Metric("loss", loss_percent(res.sent, res.received), "%",
                           flow=out.flow.name),
                    Metric("packets", float(res.sent), "count", flow=out.flow.name)]
    if res.sent == 0:
        out.error = f"flow {out.flow.name}: ping sent nothing"


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    collect_ping(out, text, t0)


KIND = register(Kind(
    name="ping", options=OPTIONS, expand=_expand, figures=figures(probe_loss=True),
    headline=("rtt_median", "rtt_p95", "rtt_max", "loss", "rtt_jitter"),
    metrics=RTT_METRICS,
    flow=FlowTool(tool="ping", bulk=False, rtt=True,
                  media_type="text/plain", server=lambda _f, _i, _p: None, client=_client,
                  collect=_collect)))
