"""[[tests]] entries -> Test objects: per-kind options, defaults, and the flows they expand to.

Each kind (hoplab.kind_registry) declares its options and how it expands to flows;
the keys every test has are below. Each kind accepts exactly its keys, and an
unknown key is an error naming it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from difflib import get_close_matches
from typing import Any

from hoplab import kind_registry as registry
from hoplab.kind_registry import Parse
from hoplab.spec.experiment import (
    SAMPLER_KINDS,
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
    parse_str,
    parse_time,
)


def _kind(value: object) -> str:
    # Read at each use: a kind registered after this module was imported counts too.
    return choice(registry.names())(value)


_COMMON: dict[str, Parse] = {"name": parse_str, "kind": _kind, "from": parse_str,
                             "to": parse_str, "samplers": lambda v: v, "start": parse_time,
                             "profile": lambda v: v}
# A flow inside a custom test: its kind's options, its own ends and start, no samplers.
_FLOW_COMMON = {k: p for k, p in _COMMON.items() if k not in ("samplers", "profile")}


def options_of(kind: str) -> dict[str, Parse]:
    """Every key a test of `kind` accepts, with its parser; {} for an unknown kind."""
    found = registry.find(kind)
    return {} if found is None else {**_COMMON, **found.options}


def flow_options_of(kind: str) -> dict[str, Parse]:
    return {**_FLOW_COMMON, **registry.get(kind).options}
_SAMPLER_KEYS = ("nodes", "kinds", "interval")
_PROFILE_KEYS = ("nodes", "frequency", "during", "categories")


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

    def options(self, raw: object, path: Path, allowed: Mapping[str, Parse]) -> dict[str, Any]:
        table = self.ctx.table(raw, path, tuple(allowed))
        out = {}
        before = self.ctx.noted()
        for key, value in table.items():
            # In a check, every bad option is named; then the test is left out.
            out[key] = self.ctx.attempt(None, self.ctx.conv, (*path, key), allowed[key], value)
        self.ctx.stop_if_noted(before)
        return out

    def flow_options(self, kind: str) -> Mapping[str, Parse]:
        return flow_options_of(kind)


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
    kind = registry.get(ctx.conv((*path, "kind"), _kind, table["kind"]))
    o = r.options(table, path, options_of(kind.name))
    name = o["name"]
    src = r.node((*path, "from"), o["from"]) if "from" in o else None
    dst = r.node((*path, "to"), o["to"]) if "to" in o else None
    if kind.needs_ends and (src is None or dst is None):
        ctx.fail(path, f"a {kind.name} test needs from = NODE and to = NODE")
    if src is not None and src == dst:
        ctx.fail((*path, "to"), f"from and to are both '{src}'")
    flows, phases = kind.expand(r, name, src, dst, o, path)
    if len(flows) > registry.MAX_TEST_FLOWS:
        ctx.fail(path, too_many_flows(len(flows)))
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
    test = Test(name=name, kind=kind.name, src=src or first.src, dst=dst or first.dst,
                flows=tuple(flows), phases=tuple(phases), samplers=samplers, profile=profile,
                options={k: v for k, v in table.items() if k not in ("samplers", "profile")})
    if profile is not None and test.phase(profile.during) is None:
        where = (*path, "profile", "during") if "profile" in o else ("profile", "during")
        ctx.fail(where, f"test {name} has no phase '{profile.during}'; its phases are "
                        f"{', '.join(p.name for p in test.phases)} (or all)")
    return test


def too_many_flows(count: int) -> str:
    return (f"this test has {count} flows; at most {registry.MAX_TEST_FLOWS}: a test's "
            f"flows run together, each a tool's process, most with a server of its own")


def check_unique(ctx: SpecContext, tests: Sequence[tuple[int, Test]]) -> None:
    """No two tests of one name; `tests` are (index in the file, test)."""
    seen: set[str] = set()
    for i, t in tests:
        if t.name in seen:
            ctx.note(("tests", i, "name"), f"two tests are named '{t.name}'")
        seen.add(t.name)


def option_names() -> set[str]:
    """Every option some test kind accepts: bare matrix keys must be one of these."""
    return {k for kind in registry.names() for k in options_of(kind)} - {"name", "kind",
                                                                         "samplers"}
