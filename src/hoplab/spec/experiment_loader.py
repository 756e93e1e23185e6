"""Read an experiment file: TOML in, a validated Experiment (every variant resolved) out.

Every variant's lab and tests are built and validated here, before anything
runs, so a bad value in the third variant fails at once with its file, line
and key instead of after an hour of measuring. The format is described in
docs/experiment-format.md.
"""

from __future__ import annotations

import copy
import itertools
import math
import secrets
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hoplab import kind_registry as registry
from hoplab import kv, user_files
from hoplab.errors import SpecError, UsageError
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Experiment, Profile, Samplers, Test, Variant
from hoplab.spec.families import has_family
from hoplab.spec.loader import SpecContext, load_lab_data
from hoplab.spec.locate import split_syntax_error
from hoplab.spec.matrix import Point, apply_point, read_matrix, with_wireguard
from hoplab.spec.model import Lab
from hoplab.spec.tests_loader import check_unique, read_profile, read_samplers, read_test
from hoplab.spec.units import parse_bool, parse_int, parse_str, parse_time

_TOP_KEYS = ("name", "description", "lab", "repeat", "seed", "shuffle", "labels", "pause",
             "report", "matrix", "samplers", "profile", "tests")
_SCALAR_SETS = ("name", "repeat", "seed", "shuffle", "pause", "report")


def _toml(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = user_files.read_text(path)
    except (OSError, ValueError) as e:  # FileRefused, UnicodeDecodeError
        raise SpecError(f"cannot read the file: {e}", file=str(path)) from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message, line = split_syntax_error(str(e), text)
        raise SpecError(f"TOML syntax error: {message}", file=str(path), line=line) from None


def parse_set(item: str) -> tuple[str, Any]:
    """--set key=value; the value is read as a TOML value (2, true, "x", [1, 2]) when it
    is one, else taken as a string, so --set duration=5s works unquoted."""
    key, text = kv.split(item, "--set", "--set hops=2", empty_value=True)
    try:
        value: Any = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    return key, value


def _apply_sets(data: dict[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """Fold --set values into the experiment table; returns settings for every variant."""
    fixed: dict[str, Any] = {}
    for item in sets:
        key, value = parse_set(item)
        if key in _SCALAR_SETS:
            data[key] = value
        elif key.startswith("labels."):
            data.setdefault("labels", {})[key.split(".", 1)[1]] = str(value)
        elif key in data.get("matrix", {}):
            data["matrix"][key] = _axis(key, data["matrix"][key], value)
        else:
            fixed[key] = value
    return fixed


def _axis(key: str, axis: object, value: Any) -> Any:
    """An axis as --set KEY=VALUE leaves it: a list of values is replaced; of a table of
    named variants (`[matrix.qos.on]`) the value names those to keep, so one variant of
    an example runs as written (`--set qos=on`, `--set 'qos=["off", "on"]'`)."""
    values = value if isinstance(value, list) else [value]
    if not isinstance(axis, dict):
        return values
    names = [str(v) for v in values]
    unknown = [n for n in names if n not in axis]
    if unknown or not names:
        raise UsageError(f"--set {key}=...: the matrix's '{key}' is a table of named "
                         f"variants ({', '.join(map(str, axis))}); "
                         + (f"it has no '{unknown[0]}'" if unknown else "name one or more"))
    return {n: v for n, v in axis.items() if n in names}


def _labels(ctx: SpecContext, raw: object) -> dict[str, str]:
    out = {}
    for k, v in ctx.table(raw, ("labels",), None).items():
        if isinstance(v, dict | list):
            ctx.fail(("labels", k), "a label is a plain value, e.g. device = \"veth\"")
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


# Every variant's lab and tests are built and checked before the first run. These bound
# that work, and what a run of the experiment schedules (measured: docs/experiment-format.md).
MAX_VARIANTS = 10_000
MAX_RUNS = 100_000
# Nodes, links and flows over every variant: the loader's memory and time grow with them.
MAX_PARTS = 200_000


class _Budget:
    """What the variants built so far add up to; over MAX_PARTS the load stops."""

    def __init__(self) -> None:
        self.parts = 0
        self.over = False

    def spend(self, ctx: SpecContext, where: tuple[str | int, ...], count: int) -> None:
        self.parts += count
        if self.parts > MAX_PARTS:
            self.over = True
            ctx.fail(where, f"this experiment is too big to check before its first run: "
                            f"its variants' labs and tests come to more than {MAX_PARTS} "
                            f"nodes, links and flows; split the matrix into several "
                            f"experiments")


def load_experiment(path: str | Path, sets: Sequence[str] = (), *,
                    repeat: int | None = None) -> Experiment:
    return _load(Path(path), sets, repeat, None)


def check_experiment(path: str | Path, sets: Sequence[str] = ()
                     ) -> tuple[Experiment | None, list[SpecError]]:
    """Every problem of an experiment file and of its lab, one per part that stands on its
    own (a top-level key, the lab's nodes and links, a test of a variant): hoplab check.
    The Experiment when there is none."""
    problems: list[SpecError] = []
    try:
        exp = _load(Path(path), sets, None, problems)
    except SpecError as e:  # a problem the rest cannot be read past
        problems.append(e)
    return (None if problems else exp), problems


def _load(path: Path, sets: Sequence[str], repeat: int | None,
          problems: list[SpecError] | None) -> Experiment:
    text, data = _toml(path)
    fixed = _apply_sets(data, sets)
    if repeat is not None:
        data["repeat"] = repeat
    ctx = SpecContext(text, str(path), problems)
    top = ctx.table(data, (), _TOP_KEYS)
    name = ctx.attempt(path.stem, ctx.conv, ("name",), parse_str, top.get("name", path.stem))
    if "lab" not in top:
        ctx.fail((), 'an experiment needs lab = "LABFILE.toml" (relative to this file)')
    lab_path = (path.parent / ctx.conv(("lab",), parse_str, top["lab"]))
    rep = ctx.attempt(1, ctx.conv, ("repeat",), ov.repeat, top.get("repeat", 1))
    seed = ctx.attempt(0, ctx.conv, ("seed",), parse_int, top["seed"]) if "seed" in top \
        else secrets.randbelow(2**31)
    shuffle = ctx.attempt(True, ctx.conv, ("shuffle",), parse_bool, top.get("shuffle", True))
    pause = ctx.attempt(0.5, ctx.conv, ("pause",), parse_time, top.get("pause", "0.5s"))
    report = ctx.attempt(False, ctx.conv, ("report",), parse_bool, top.get("report", False))
    labels = ctx.attempt({}, _labels, ctx, top.get("labels", {}))
    no_axes: dict[str, list[Point]] = {}
    axes = ctx.attempt(no_axes, read_matrix, ctx, top.get("matrix", {}))
    raw_tests = ctx.array(top.get("tests"), ("tests",)) if "tests" in top else []
    if not raw_tests:
        ctx.fail(("tests",), "an experiment needs at least one [[tests]] entry")
    _check_size(ctx, top, axes, len(raw_tests), rep)
    lab_text, lab_raw = _toml(lab_path)
    fixed_point: Point = ("--set", fixed)
    variants = []
    budget = _Budget()
    for combo in itertools.product(*[[(k, p) for p in pts] for k, pts in axes.items()]):
        variant = ctx.attempt(None, _variant, ctx, lab_text, lab_raw, str(lab_path),
                              raw_tests, top.get("samplers", {}), top.get("profile"),
                              [("--set", fixed_point), *combo], budget)
        if budget.over:
            break
        if variant is not None:
            variants.append(variant)
    return Experiment(name=name, source=str(path), lab_source=str(lab_path), repeat=rep,
                      seed=seed, shuffle=shuffle, labels=labels, pause_s=pause,
                      variants=tuple(variants), report=report,
                      matrix={k: tuple(p[0] for p in pts) for k, pts in axes.items()})


def _check_size(ctx: SpecContext, top: dict[str, Any], axes: dict[str, list[Point]],
                tests: int, repeat: int) -> None:
    """How many variants and runs, from the axes alone: refused before any is built."""
    variants = math.prod(len(points) for points in axes.values())
    if variants > MAX_VARIANTS:
        ctx.fail(("matrix",), f"the matrix makes {variants} variants; at most {MAX_VARIANTS}: "
                              f"each is a lab built and checked before the first run")
    runs = variants * tests * repeat
    if runs > MAX_RUNS:
        where = ("repeat",) if "repeat" in top else ("matrix",) if axes else ("tests",)
        ctx.fail(where, f"this experiment is {runs} runs ({variants} variants x {tests} "
                        f"tests x {repeat} repetitions); at most {MAX_RUNS}: each builds on "
                        f"a lab and runs for its duration and pause, and all are scheduled "
                        f"before the first")


def _variant(ctx: SpecContext, lab_text: str, lab_raw: dict[str, Any], lab_source: str,
             raw_tests: list[Any], raw_samplers: object, raw_profile: object,
             combo: Sequence[tuple[str, Point]], budget: _Budget) -> Variant:
    values = {key: point[0] for key, point in combo if key != "--set"}
    label = kv.pairs(values, "")
    noted = len(ctx.problems or ())
    try:
        return _build_variant(ctx, lab_text, lab_raw, lab_source, raw_tests, raw_samplers,
                              raw_profile, combo, values, budget)
    except SpecError as e:
        raise _in_variant(e, label) from None
    finally:
        if ctx.problems is not None:
            ctx.problems[noted:] = [_in_variant(e, label) for e in ctx.problems[noted:]]


def _in_variant(e: SpecError, label: str) -> SpecError:
    if not label:
        return e
    return SpecError(f"{e.message} (in variant {label})", file=e.file, key=e.key, line=e.line)


def _build_variant(ctx: SpecContext, lab_text: str, lab_raw: dict[str, Any], lab_source: str,
                   raw_tests: list[Any], raw_samplers: object, raw_profile: object,
                   combo: Sequence[tuple[str, Point]], values: dict[str, Any],
                   budget: _Budget) -> Variant:
    lab_data = copy.deepcopy(lab_raw)
    tests_data = copy.deepcopy(raw_tests)
    wireguard: bool | None = None
    setup: list[tuple[str, tuple[str, ...]]] = []
    for key, (shown, sets) in combo:
        where: tuple[str, ...] = () if key == "--set" else \
            ("matrix",) if sets == {key: shown} else ("matrix", key, str(shown))
        wg, cmds = apply_point(ctx, sets, lab_data, tests_data, where)
        wireguard = wg if wg is not None else wireguard
        setup += cmds
    noted = len(ctx.problems or ())
    lab = load_lab_data(lab_data, lab_text, lab_source, problems=ctx.problems)
    # In a check, a lab with a problem is still read for its node names, but what a
    # test needs of its links is not judged against it.
    lab_ok = len(ctx.problems or ()) == noted
    budget.spend(ctx, ("matrix",) if values else (), len(lab.nodes) + len(lab.links))
    if wireguard is not None:
        lab = with_wireguard(lab, wireguard)
    nodes = lab.node_names()
    for node, _ in setup:
        if node not in nodes:
            ctx.note(("matrix",), f"setup.{node}: node '{node}' is not in the lab")
    samplers = ctx.attempt(Samplers(), read_samplers, ctx, raw_samplers, ("samplers",),
                           nodes) if raw_samplers else Samplers()
    profile = ctx.attempt(None, read_profile, ctx, raw_profile, ("profile",), nodes) \
        if raw_profile is not None else None
    tests: list[tuple[int, Test]] = []
    for i, raw in enumerate(tests_data):
        test = ctx.attempt(None, _test, ctx, raw, ("tests", i), lab if lab_ok else None,
                           nodes, samplers, profile)
        if test is not None:
            tests.append((i, test))
            budget.spend(ctx, ("tests", i), len(test.flows))
    check_unique(ctx, tests)
    return Variant(values=values, lab=lab, tests=tuple(t for _, t in tests),
                   setup=tuple(setup))


def _test(ctx: SpecContext, raw: object, path: tuple[str | int, ...], lab: Lab | None,
          nodes: Sequence[str], samplers: Samplers, profile: Profile | None) -> Test:
    test = read_test(ctx, raw, path, nodes, samplers, profile)
    if lab is not None:
        _check_joined(ctx, test, raw, path, lab)
        _check_family(ctx, test, raw, path, lab)
        _check_congestion(ctx, test, raw, path, lab)
    return test


def _check_family(ctx: SpecContext, test: Test, raw: object, path: tuple[str | int, ...],
                  lab: Lab) -> None:
    """An IPv6 flow in a lab without IPv6 addresses, or from or to a node without one,
    could never run: refuse it now, at the key that asked for it, rather than fail
    every run of it later. (Every kind's `family` comes here: ping, probe, web, tcp,
    udp, rrul and custom flows.)"""
    for f in test.flows:
        if f.family != 6:
            continue
        where = key_path(raw, path, "family", 6) or path
        if not lab.addressing.ipv6:
            ctx.fail(where, "family = 6 needs IPv6, but the lab has ipv6 = false in "
                            "[addressing]")
        # A device whose address SSH tells (None) is known only at lab up.
        bare = next((n for n in (f.dst, f.src) if has_family(lab, n, 6) is False), None)
        if bare is not None:
            ctx.fail(where, f"family = 6 needs IPv6 at both ends of flow {f.name}, but "
                            f"node '{bare}' has no IPv6 address (none of its links "
                            f"carries IPv6)")


def _check_congestion(ctx: SpecContext, test: Test, raw: object,
                      path: tuple[str | int, ...], lab: Lab) -> None:
    """A congestion control this machine's kernel lacks fails every run of a flow with a
    namespace end (iperf3 -C sets it at both ends): refuse it now. A device's kernel is
    asked by `hoplab check --devices`."""
    devices = {n.name for n in lab.devices()}
    host: tuple[str, ...] | None = None
    for f in test.flows:
        name = registry.flow_tool(f.kind).congestion(f)
        here = next((n for n in (f.src, f.dst) if n not in devices), None)
        if name is None or here is None:
            continue
        host = host if host is not None else ov.host_congestion()
        why = None if host is None else ov.congestion_missing(
            name, host, f"this machine's kernel (node '{here}' of flow {f.name})")
        if why is not None:
            ctx.fail(key_path(raw, path, "congestion", name) or path, why)


def _check_joined(ctx: SpecContext, test: Test, raw: object, path: tuple[str | int, ...],
                  lab: Lab) -> None:
    """A flow between nodes no path of links joins could never run (a node without
    links has no address at all)."""
    part = {n: n for n in lab.node_names()}

    def root(n: str) -> str:
        while part[n] != n:
            # Path halving: without it a mesh's long parent chains made this quadratic
            # (24 s for 18 variants of a 1000-node, 10000-link mesh).
            part[n] = part[part[n]]
            n = part[n]
        return n

    for link in lab.links:
        part[root(link.a)] = root(link.b)
    for f in test.flows:
        if root(f.src) == root(f.dst):
            continue
        linked = {n for lk in lab.links for n in (lk.a, lk.b)}
        lone = next((n for n in (f.dst, f.src) if n not in linked), None)
        # Point at where this flow's end is written: the most deeply nested of its
        # `to` and `from` (a custom flow's own keys beat the test's), `to` on a tie.
        ends = [k for k in (key_path(raw, path, "to", f.dst), key_path(raw, path, "from", f.src))
                if k is not None and (lone is None or k[-1] == ("to" if lone == f.dst else "from"))]
        where = max(ends, key=len) if ends else path
        ctx.fail(where, f"node '{lone}' has no links, so no address to send to or from"
                 if lone else f"no path of links joins '{f.src}' and '{f.dst}'")


def key_path(raw: object, path: tuple[str | int, ...], key: str, value: object = None
              ) -> tuple[str | int, ...] | None:
    """The first place `key` is written under `raw`, a test's table, depth first (with
    `value`, the first place it is written with that value)."""
    if isinstance(raw, dict):
        if key in raw and (value is None or raw[key] == value):
            return (*path, key)
        items: list[tuple[str | int, object]] = list(raw.items())
    elif isinstance(raw, list):
        items = list(enumerate(raw))
    else:
        return None
    for k, item in items:
        found = key_path(item, (*path, k), key, value)
        if found is not None:
            return found
    return None
