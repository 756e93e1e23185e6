"""[[tests]] entries -> Test objects: per-kind options, defaults, and the flows they expand to.

The option tables below are the reference for docs/experiment-format.md: each
kind accepts exactly its keys, and an unknown key is an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from difflib import get_close_matches
from typing import Any

from hoplab.spec import option_values as ov
from hoplab.spec.experiment import (
    DIRECTIONS,
    FLOW_KINDS,
    SAMPLER_KINDS,
    TEST_KINDS,
    Flow,
    Phase,
    Profile,
    Samplers,
    Test,
)
from hoplab.spec.loader import SpecContext
from hoplab.spec.locate import Path
from hoplab.spec.units import (
    choice,
    parse_int,
    parse_rate,
    parse_size,
    parse_str,
    parse_time,
)

Parse = Callable[[object], Any]


_COMMON: dict[str, Parse] = {"name": parse_str, "kind": choice(TEST_KINDS), "from": parse_str,
                             "to": parse_str, "samplers": lambda v: v, "start": parse_time,
                             "profile": lambda v: v}
_BULK: dict[str, Parse] = {
    "flows": ov.positive_int, "direction": choice(DIRECTIONS), "duration": ov.whole_seconds,
    "bytes": parse_size, "cport": ov.port, "affinity": ov.affinity, "congestion": parse_str,
    "tos": ov.tos, "rate": parse_rate, "length": parse_size,
}
OPTIONS: dict[str, dict[str, Parse]] = {
    "tcp": {**_COMMON, **_BULK},
    "udp": {**_COMMON, **_BULK},
    "ping": {**_COMMON, "duration": ov.duration, "interval": ov.interval, "size": parse_size,
             "tos": ov.tos, "family": ov.family, "streams": lambda v: v},
    "probe": {**_COMMON, "duration": ov.duration, "interval": ov.interval, "length": parse_size,
              "tos": ov.tos, "family": ov.family},
    "rrul": {**_COMMON, "duration": ov.whole_seconds, "idle": parse_time,
             "flows": ov.positive_int, "congestion": parse_str, "ping_interval": ov.interval,
             "probe_interval": ov.interval, "tos": ov.tos},
    "custom": {**_COMMON, "flows": lambda v: v, "duration": ov.duration},
}
_FLOW_OPTIONS: dict[str, dict[str, Parse]] = {
    k: {**{o: p for o, p in OPTIONS[k].items() if o not in ("samplers", "profile")},
        "start": parse_time} for k in FLOW_KINDS}
_STREAM_KEYS: dict[str, Parse] = {"name": parse_str, "to": parse_str, "tos": ov.tos,
                                  "interval": ov.interval, "size": parse_size,
                                  "family": ov.family}
_SAMPLER_KEYS = ("nodes", "kinds", "interval")
_PROFILE_KEYS = ("nodes", "frequency", "during", "categories")
DEFAULT_DURATION = 10.0


class _TestReader:
    def __init__(self, ctx: SpecContext, nodes: Collection[str]) -> None:
        self.ctx = ctx
        self.nodes = nodes

    def node(self, path: Path, value: object) -> str:
        name = self.ctx.conv(path, parse_str, value)
        if name not in self.nodes:
            hint = get_close_matches(name, list(self.nodes), n=1)
            did = f" (did you mean '{hint[0]}'?)" if hint else ""
            self.ctx.fail(path, f"node '{name}' is not in the lab{did}; its nodes are "
                                f"{', '.join(self.nodes)}")
        return name

    def options(self, raw: object, path: Path, allowed: dict[str, Parse]) -> dict[str, Any]:
        table = self.ctx.table(raw, path, tuple(allowed))
        out = {}
        for key, value in table.items():
            out[key] = self.ctx.conv((*path, key), allowed[key], value)
        if "duration" in out and "bytes" in out:
            self.ctx.fail((*path, "bytes"), "give duration or bytes, not both")
        return out


def _bulk_flows(name: str, kind_: str, src: str, dst: str, o: dict[str, Any]) -> list[Flow]:
    count = o.get("flows", 1)
    affinity: tuple[str, ...] = o.get("affinity", ())
    nbytes = o.get("bytes")
    duration = None if nbytes is not None else o.get("duration", DEFAULT_DURATION)
    rate = o.get("rate", 1_000_000 if kind_ == "udp" else None)
    flows = []
    for i in range(count):
        flows.append(Flow(
            name=f"{name}.{i + 1}" if count > 1 else name, kind=kind_, src=src, dst=dst,
            start_s=o.get("start", 0.0), duration_s=duration, bytes=nbytes,
            direction=o.get("direction", "up"), rate_bps=rate, length=o.get("length"),
            cport=o["cport"] + i if "cport" in o else None,
            affinity=affinity[i % len(affinity)] if affinity else None,
            congestion=o.get("congestion"), tos=o.get("tos")))
    return flows


def _ping_flows(r: _TestReader, name: str, src: str, dst: str, o: dict[str, Any],
                path: Path) -> list[Flow]:
    base = dict(start_s=o.get("start", 0.0), duration_s=o.get("duration", DEFAULT_DURATION),
                interval_s=o.get("interval", 0.2), size=o.get("size", 56), tos=o.get("tos"),
                family=o.get("family", 4))
    streams = o.get("streams")
    if streams is None:
        return [Flow(name=name, kind="ping", src=src, dst=dst, **base)]
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
    return flows


def _probe_flow(name: str, src: str, dst: str, o: dict[str, Any]) -> Flow:
    # A VoIP-like default: one 172-byte packet every 20 ms (G.711 at 50 packets/s).
    return Flow(name=name, kind="probe", src=src, dst=dst, start_s=o.get("start", 0.0),
                duration_s=o.get("duration", DEFAULT_DURATION),
                interval_s=o.get("interval", 0.02), length=o.get("length", 172),
                tos=o.get("tos"), family=o.get("family", 4))


def _rrul(name: str, src: str, dst: str, o: dict[str, Any]) -> tuple[list[Flow], list[Phase]]:
    idle = o.get("idle", 5.0)
    load = o.get("duration", 20.0)
    total = idle + load + idle
    n = o.get("flows", 4)
    bulk = {"flows": n, "duration": load, "start": idle, "congestion": o.get("congestion")}
    flows = (_bulk_flows(f"{name}.up", "tcp", src, dst, {**bulk, "direction": "up"})
             + _bulk_flows(f"{name}.down", "tcp", src, dst, {**bulk, "direction": "down"}))
    flows.append(Flow(name=f"{name}.ping", kind="ping", src=src, dst=dst, duration_s=total,
                      interval_s=o.get("ping_interval", 0.2), size=56, tos=o.get("tos")))
    flows.append(Flow(name=f"{name}.probe", kind="probe", src=src, dst=dst, duration_s=total,
                      interval_s=o.get("probe_interval", 0.02), length=172, tos=o.get("tos")))
    phases = [Phase("idle", 0.0, idle), Phase("load", idle, idle + load),
              Phase("idle-after", idle + load, total)]
    return flows, [p for p in phases if p.end_s > p.start_s]


def _custom(r: _TestReader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> list[Flow]:
    raw_flows = r.ctx.array(o.get("flows"), (*path, "flows"))
    if not raw_flows:
        r.ctx.fail((*path, "flows"), "a custom test needs at least one [[tests.flows]] entry")
    flows: list[Flow] = []
    for i, raw in enumerate(raw_flows):
        where = (*path, "flows", i)
        table = r.ctx.table(raw, where, None)
        if "kind" not in table:
            r.ctx.fail(where, f"each flow needs kind = one of {', '.join(FLOW_KINDS)}")
        fkind = r.ctx.conv((*where, "kind"), choice(FLOW_KINDS), table["kind"])
        fo = r.options(table, where, _FLOW_OPTIONS[fkind])
        fsrc = r.node((*where, "from"), fo["from"]) if "from" in fo else src
        fdst = r.node((*where, "to"), fo["to"]) if "to" in fo else dst
        if fsrc is None or fdst is None:
            r.ctx.fail(where, "a flow needs from and to (or the test's from and to)")
        if "duration" not in fo and "bytes" not in fo and "duration" in o:
            fo["duration"] = o["duration"]
            if fkind in ("tcp", "udp") and fo["duration"] != int(fo["duration"]):
                r.ctx.fail((*path, "duration"), "iperf3 runs for whole seconds; this "
                                                "duration is given to tcp and udp flows")
        fname = fo.get("name", f"{fkind}{i + 1}")
        flows += _kind_flows(r, f"{name}.{fname}", fkind, fsrc, fdst, fo, where)
    return flows


def _kind_flows(r: _TestReader, name: str, kind_: str, src: str, dst: str, o: dict[str, Any],
                path: Path) -> list[Flow]:
    if kind_ in ("tcp", "udp"):
        return _bulk_flows(name, kind_, src, dst, o)
    if kind_ == "ping":
        return _ping_flows(r, name, src, dst, o, path)
    return [_probe_flow(name, src, dst, o)]


def _samplers(r: _TestReader, raw: object, path: Path, default: Samplers) -> Samplers:
    table = r.ctx.table(raw, path, _SAMPLER_KEYS)
    nodes = default.nodes
    if "nodes" in table:
        nodes = tuple(r.node((*path, "nodes", i), v)
                      for i, v in enumerate(r.ctx.array(table["nodes"], (*path, "nodes"))))
    kinds = default.kinds
    if "kinds" in table:
        kinds = tuple(r.ctx.conv((*path, "kinds", i), choice(SAMPLER_KINDS), v)
                      for i, v in enumerate(r.ctx.array(table["kinds"], (*path, "kinds"))))
    interval = default.interval_s
    if "interval" in table:
        interval = r.ctx.conv((*path, "interval"), parse_time, table["interval"])
        if not 0.01 <= interval <= 0.2:
            r.ctx.fail((*path, "interval"), "the sampling interval must be 10ms to 200ms "
                                            "(at least 5 samples a second)")
    return Samplers(nodes=nodes, kinds=kinds, interval_s=interval)


def _profile(r: _TestReader, raw: object, path: Path, default: Profile | None
             ) -> Profile | None:
    if raw is False:
        return None
    table = r.ctx.table(raw, path, _PROFILE_KEYS)
    base = default or Profile()
    nodes = base.nodes
    if "nodes" in table:
        nodes = tuple(r.node((*path, "nodes", i), v)
                      for i, v in enumerate(r.ctx.array(table["nodes"], (*path, "nodes"))))
    freq = base.frequency
    if "frequency" in table:
        freq = r.ctx.conv((*path, "frequency"), parse_int, table["frequency"])
        if not 1 <= freq <= 20000:
            r.ctx.fail((*path, "frequency"), f"a sampling frequency is 1-20000 Hz, got {freq}")
    during = r.ctx.conv((*path, "during"), parse_str, table.get("during", base.during))
    cats = r.ctx.conv((*path, "categories"), parse_str, table["categories"]) \
        if "categories" in table else base.categories
    return Profile(nodes=nodes, frequency=freq, during=during, categories=cats)


def read_profile(ctx: SpecContext, raw: object, path: Path, nodes: Collection[str]
                 ) -> Profile | None:
    return _profile(_TestReader(ctx, nodes), raw, path, None)


def read_samplers(ctx: SpecContext, raw: object, path: Path, nodes: Collection[str]) -> Samplers:
    return _samplers(_TestReader(ctx, nodes), raw, path, Samplers())


def read_test(ctx: SpecContext, raw: object, path: Path, nodes: Collection[str],
              default_samplers: Samplers, default_profile: Profile | None = None) -> Test:
    r = _TestReader(ctx, nodes)
    table = ctx.table(raw, path, None)
    for key in ("name", "kind"):
        if key not in table:
            ctx.fail(path, f"a test needs {key} = ...")
    kind_ = ctx.conv((*path, "kind"), choice(TEST_KINDS), table["kind"])
    o = r.options(table, path, OPTIONS[kind_])
    name = o["name"]
    src = r.node((*path, "from"), o["from"]) if "from" in o else None
    dst = r.node((*path, "to"), o["to"]) if "to" in o else None
    if kind_ != "custom" and (src is None or dst is None):
        ctx.fail(path, f"a {kind_} test needs from = NODE and to = NODE")
    if src is not None and src == dst:
        ctx.fail((*path, "to"), f"from and to are both '{src}'")
    phases: list[Phase] = []
    if kind_ == "rrul":
        assert src is not None and dst is not None
        flows, phases = _rrul(name, src, dst, o)
    elif kind_ == "custom":
        flows = _custom(r, name, src, dst, o, path)
    else:
        assert src is not None and dst is not None
        flows = _kind_flows(r, name, kind_, src, dst, o, path)
    if not phases:
        end = max((f.end_s or 0.0) for f in flows)
        phases = [Phase("load", 0.0, end)] if end > 0 else []
    samplers = default_samplers
    if "samplers" in o:
        samplers = _samplers(r, o["samplers"], (*path, "samplers"), default_samplers)
    profile = default_profile
    if "profile" in o:
        profile = _profile(r, o["profile"], (*path, "profile"), default_profile)
    first = flows[0]
    test = Test(name=name, kind=kind_, src=src or first.src, dst=dst or first.dst,
                flows=tuple(flows), phases=tuple(phases), samplers=samplers, profile=profile,
                options={k: v for k, v in table.items() if k not in ("samplers", "profile")})
    if profile is not None and test.phase(profile.during) is None:
        where = (*path, "profile", "during") if "profile" in o else ("profile", "during")
        ctx.fail(where, f"test {name} has no phase '{profile.during}'; its phases are "
                        f"{', '.join(p.name for p in test.phases)} (or all)")
    return test


def check_unique(ctx: SpecContext, tests: Sequence[Test]) -> None:
    seen: set[str] = set()
    for i, t in enumerate(tests):
        if t.name in seen:
            ctx.fail(("tests", i, "name"), f"two tests are named '{t.name}'")
        seen.add(t.name)


def option_names() -> set[str]:
    """Every option some test kind accepts: bare matrix keys must be one of these."""
    return {k for opts in OPTIONS.values() for k in opts} - {"name", "kind", "samplers"}
