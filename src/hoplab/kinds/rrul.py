"""rrul: latency under load, as Flent's Realtime Response Under Load. Idle, then
`flows` TCP uploads and as many downloads with a ping stream and an irtt probe
throughout, then idle again; the load phase's RTT against the idle phases' gives
the added latency and its bufferbloat grade."""

from __future__ import annotations

from typing import Any

from hoplab.kind_registry import Kind, Option, Reader, register
from hoplab.kinds.figures import figures, phase_latency
from hoplab.kinds.ping import PingOptions
from hoplab.kinds.probe import PROBE_METRICS, ProbeOptions
from hoplab.kinds.tcp import BULK_METRICS, RFC6349_METRICS, bulk_flows
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import parse_time

OPTIONS: dict[str, Option] = {
    "duration": Option(ov.whole_seconds, "the load phase (whole seconds)", '`"20s"`'),
    "idle": Option(parse_time, "each idle phase", '`"5s"`'),
    "flows": Option(ov.flows, "TCP flows in each direction (at most 128)", "4"),
    "congestion": Option(ov.congestion, "congestion control of the TCP flows, as for tcp",
                         "system default"),
    "ping_interval": Option(ov.interval, "time between the ping stream's echoes",
                            '`"200ms"`'),
    "probe_interval": Option(ov.interval, "time between the probe's packets", '`"20ms"`'),
    "tos": Option(ov.tos, "TOS byte of the ping stream and the probe, as for ping"),
    "family": Option(ov.family, "4 or 6, for every flow: the bulk flows, the ping stream "
                                "and the probe", "4"),
}


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    idle = o.get("idle", 5.0)
    load = o.get("duration", 20.0)
    total = idle + load + idle
    family = o.get("family", 4)
    bulk = {"flows": o.get("flows", 4), "duration": load, "start": idle,
            "congestion": o.get("congestion"), "family": family}
    flows = (bulk_flows(f"{name}.up", "tcp", src, dst, {**bulk, "direction": "up"})
             + bulk_flows(f"{name}.down", "tcp", src, dst, {**bulk, "direction": "down"}))
    flows.append(Flow(name=f"{name}.ping", kind="ping", src=src, dst=dst, duration_s=total,
                      family=family, options=PingOptions(
                          interval_s=o.get("ping_interval", 0.2), size=56, tos=o.get("tos"))))
    flows.append(Flow(name=f"{name}.probe", kind="probe", src=src, dst=dst, duration_s=total,
                      family=family, options=ProbeOptions(
                          interval_s=o.get("probe_interval", 0.02), length=172,
                          tos=o.get("tos"))))
    phases = [Phase("idle", 0.0, idle), Phase("load", idle, idle + load),
              Phase("idle-after", idle + load, total)]
    return flows, [p for p in phases if p.end_s > p.start_s]


KIND = register(Kind(
    name="rrul", options=OPTIONS, expand=_expand,
    # Totals per direction even when every flow is one way: rrul's question is both.
    figures=figures(by_direction=True, probe_loss=True, steps=(phase_latency,)),
    headline=("goodput_up", "goodput_down", "latency_idle", "latency_load",
              "latency_increase"),
    metrics=(*BULK_METRICS, *PROBE_METRICS, "latency_idle", "latency_load",
             "latency_load_p95", "latency_increase", *RFC6349_METRICS),
    notes=("grade", "load_levels")))
