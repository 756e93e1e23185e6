"""responsiveness: round trips per minute under working conditions (RPM), as
draft-ietf-ippm-responsiveness-08 defines them (docs/responsiveness.md).

The `to` node serves the draft's test server (nginx, HTTP/2 over TLS with a certificate
made for the run: hoplab.tools.rpm_server); the `from` node runs hoplab's client
(hoplab.tools.rpm_client), which adds load-generating connections until goodput is
stable and probes all along: foreign probes on new connections (TCP handshake, TLS
handshake, a small GET) and self probes on the load connections (HTTP/2 streams beside
the load). Both ends run hoplab's own Python, so both are namespace nodes of this
machine.

The figures are the draft's arithmetic (hoplab.analysis.rpm) over the client's recorded
intervals and probes, replayed here as the client decided: `rpm`, its parts
`rpm_foreign_ms` and `rpm_self_ms` (the trimmed means that make it, over the last MAD
intervals), `rpm_goodput` of each direction (key "up", "down") over the same
intervals, and `rpm_confidence` (1 low, 2 medium, 3 high: the draft's confidence, of
the less certain of its two stages).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hoplab.analysis import rpm as algo
from hoplab.errors import HoplabError
from hoplab.kind_registry import FlowTool, Kind, Option, Reader, register
from hoplab.kinds.figures import figures
from hoplab.kinds.flow import ClientTimes, Outcome, Server, address
from hoplab.lab.plan import Plan
from hoplab.record import Metric, Series
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase, Test
from hoplab.spec.locate import Path
from hoplab.spec.units import choice
from hoplab.tool_table import need
from hoplab.tools import rpm_client, rpm_server

RPM_BASE_PORT = 4043
# The draft's example of a time limit: 10 s for each of a direction's two stages
# (goodput saturation, responsiveness saturation); goresponsiveness's default is 20 s.
DEFAULT_DURATION_S = 20.0
METRICS = ("rpm", "rpm_foreign_ms", "rpm_self_ms", "rpm_goodput", "rpm_confidence")


def _duration(value: object) -> float:
    seconds = ov.duration(value)
    if seconds < 2 or seconds > 600:
        raise ValueError(f"a responsiveness test lasts 2s to 10min, not {value!r}")
    return seconds


def _probes(value: object) -> int:
    n = ov.positive_int(value)
    if n > 100:
        raise ValueError(f"at most 100 probe pairs a second (the draft's MPS), not {n}")
    return n


OPTIONS: dict[str, Option] = {
    "duration": Option(_duration, "how long working conditions may last: the test ends "
                                  "when responsiveness is stable or at this time "
                                  "(goodput gets half of it at most); the draft's example "
                                  "of a limit", '`"20s"`'),
    "direction": Option(choice(rpm_client.DIRECTIONS), "`down`: the load downloads the "
                                                       "large object; `up`: it uploads; "
                                                       "`both`: both at once, one score",
                        '`"both"`'),
    "congestion": Option(ov.congestion, "congestion control of the load connections, set "
                                        "per socket (TCP_CONGESTION) on the sending side: "
                                        "the client's sockets for an upload, the server's "
                                        "listening socket for a download", "system default"),
    "family": Option(ov.family, "4 or 6", "4"),
    "probes": Option(_probes, "probe pairs a second at most (a foreign and a self probe "
                              "each; the draft's MPS is 100)", str(rpm_client.CLIENT_MPS)),
}


@dataclass(frozen=True)
class RpmOptions:
    direction: str = "both"
    congestion: str | None = None
    probes: int = rpm_client.CLIENT_MPS


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    return [Flow(name=name, kind="responsiveness", src=src, dst=dst,
                 start_s=o.get("start", 0.0), duration_s=o.get("duration", DEFAULT_DURATION_S),
                 family=o.get("family", 4),
                 options=RpmOptions(direction=o.get("direction", "both"),
                                    congestion=o.get("congestion"),
                                    probes=o.get("probes", rpm_client.CLIENT_MPS)))], []


def _port(index: int) -> int:
    return RPM_BASE_PORT + index


def _on_this_machine(plan: Plan, flow: Flow, node: str, what: str) -> None:
    """Client and server are hoplab's own Python: they run in namespace nodes."""
    if not plan.lab.node(node).node_kind.local:
        raise HoplabError(f"flow {flow.name}: {node} is a device reached over SSH; a "
                          f"responsiveness test's {what} runs in a namespace node of this "
                          f"machine")


def _server(flow: Flow, index: int, plan: Plan) -> Server:
    _on_this_machine(plan, flow, flow.dst, "server (nginx and hoplab's discarding server)")
    port, ipv6 = _port(index), flow.family == 6
    host = address(plan, flow.dst, flow.family)
    cc = flow.options_as(RpmOptions).congestion
    return Server(flow.dst, "tcp", port, [], files=lambda home: (
        rpm_server.files(home, host, port, ipv6),
        rpm_server.argv(sys.executable, home, port, ipv6, cc)))


def _client(flow: Flow, index: int, plan: Plan) -> list[str]:
    _on_this_machine(plan, flow, flow.src, "client")
    host = address(plan, flow.dst, flow.family)
    o = flow.options_as(RpmOptions)
    url = f"https://{f'[{host}]' if flow.family == 6 else host}:{_port(index)}" \
          f"{rpm_server.WELL_KNOWN}"
    assert flow.duration_s is not None
    return rpm_client.argv(sys.executable, rpm_client.Plan(url, flow.duration_s, o.direction,
                                                           o.congestion, o.probes))


def goodput_by_way(res: rpm_client.Result, last: int, mad: int) -> dict[str, float]:
    """Each direction's goodput over the last MAD intervals (bit/s): its bytes over their
    time."""
    window = res.intervals[max(0, last + 1 - mad):last + 1]
    seconds = math.fsum(iv.seconds for iv in window)
    ways = rpm_client.ways(res.header.get("direction", "both"))
    return {w: 8 * sum(iv.bytes.get(w, 0) for iv in window) / seconds if seconds else 0.0
            for w in ways}


def figures_of(res: rpm_client.Result, flow: str | None) -> list[Metric]:
    """The run's figures from the client's output, by the draft's arithmetic as the
    client applied it (replayed)."""
    if not res.intervals:
        return []
    prog = rpm_client.replay(res)
    out = [Metric("rpm_confidence", float(prog.confidence()), "level", flow=flow)]
    got = prog.result(res.foreign, res.selfs)
    if got is not None:
        out += [Metric("rpm", got.rpm, "RPM", flow=flow),
                Metric("rpm_foreign_ms", got.foreign_ms, "ms", flow=flow),
                Metric("rpm_self_ms", got.self_ms, "ms", flow=flow)]
    for way, bps in goodput_by_way(res, len(res.intervals) - 1, prog.mad).items():
        out.append(Metric("rpm_goodput", bps, "bit/s", flow=flow, key=way))
    return out


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    res = rpm_client.parse(text)
    name = out.flow.name
    for way in rpm_client.ways(res.header.get("direction", "both")):
        out.series.append(Series("rpm_goodput", "bit/s", [iv.end - t0 for iv in res.intervals],
                                 [8 * iv.bytes.get(way, 0) / iv.seconds if iv.seconds else 0.0
                                  for iv in res.intervals], flow=name, key=way))
    out.series.append(Series("rpm_foreign_ms", "ms", [t - t0 for t in res.foreign_at],
                             [_foreign_rtt(p) for p in res.foreign], flow=name))
    out.series.append(Series("rpm_self_ms", "ms", [t - t0 for t in res.self_at],
                             [p.http_ms for p in res.selfs], flow=name))
    out.metrics += figures_of(res, name)
    done = res.done
    if done is None:
        out.error = f"flow {name}: the client stopped before the test's end"
    elif done.get("reason") == "error":
        out.error = f"flow {name}: {done.get('error')}"
    elif not any(m.name == "rpm" for m in out.metrics):
        out.error = f"flow {name}: no probe of each kind completed ({len(res.failed)} failed)"


def _foreign_rtt(p: algo.Foreign) -> float:
    """One foreign probe's round trip as the draft weighs its parts: their mean."""
    parts = [p.tcp_ms, p.http_ms, *([] if p.tls_ms is None else [p.tls_ms])]
    return math.fsum(parts) / len(parts)


def _run_level(test: Test, outcomes: Sequence[Outcome]) -> tuple[list[Metric], dict[str, str]]:
    """A test of one responsiveness flow: its figures are the run's."""
    mine = [o for o in outcomes if o.flow.kind == "responsiveness"]
    if len(mine) != 1:
        return [], {}
    return [Metric(m.name, m.value, m.unit, key=m.key) for m in mine[0].metrics
            if m.name in METRICS], {}


KIND = register(Kind(
    name="responsiveness", options=OPTIONS, expand=_expand,
    figures=figures(steps=(_run_level,)),
    headline=("rpm", "rpm_foreign_ms", "rpm_self_ms", "rpm_confidence"),
    metrics=METRICS,
    flow=FlowTool(tool="python3", bulk=False, rtt=False,
                  media_type="application/x-ndjson", server=_server, client=_client,
                  collect=_collect, needs=(need("nginx"),), server_tool="nginx",
                  overrun=lambda _flow: 10.0,
                  congestion=lambda flow: flow.options_as(RpmOptions).congestion)))
