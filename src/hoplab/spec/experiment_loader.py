"""Read an experiment file: TOML in, a validated Experiment (every variant resolved) out.

Every variant's lab and tests are built and validated here, before anything
runs, so a bad value in the third variant fails at once with its file, line
and key instead of after an hour of measuring. The format is described in
docs/experiment-format.md.
"""

from __future__ import annotations

import copy
import itertools
import secrets
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hoplab import kv
from hoplab.errors import SpecError
from hoplab.spec.experiment import Experiment, Samplers, Test, Variant
from hoplab.spec.families import has_family
from hoplab.spec.loader import SpecContext, load_lab_data
from hoplab.spec.locate import split_syntax_error
from hoplab.spec.matrix import Point, apply_point, read_matrix, with_wireguard
from hoplab.spec.model import Lab
from hoplab.spec.tests_loader import check_unique, read_profile, read_samplers, read_test
from hoplab.spec.units import parse_bool, parse_int, parse_str, parse_time

_TOP_KEYS = ("name", "description", "lab", "repeat", "seed", "shuffle", "labels", "pause",
             "matrix", "samplers", "profile", "tests")
_SCALAR_SETS = ("name", "repeat", "seed", "shuffle", "pause")


def _toml(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
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
            data["matrix"][key] = value if isinstance(value, list) else [value]
        else:
            fixed[key] = value
    return fixed


def _labels(ctx: SpecContext, raw: object) -> dict[str, str]:
    out = {}
    for k, v in ctx.table(raw, ("labels",), None).items():
        if isinstance(v, dict | list):
            ctx.fail(("labels", k), "a label is a plain value, e.g. device = \"veth\"")
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def load_experiment(path: str | Path, sets: Sequence[str] = (), *,
                    repeat: int | None = None) -> Experiment:
    path = Path(path)
    text, data = _toml(path)
    fixed = _apply_sets(data, sets)
    if repeat is not None:
        data["repeat"] = repeat
    ctx = SpecContext(text, str(path))
    top = ctx.table(data, (), _TOP_KEYS)
    name = ctx.conv(("name",), parse_str, top.get("name", path.stem))
    if "lab" not in top:
        ctx.fail((), 'an experiment needs lab = "LABFILE.toml" (relative to this file)')
    lab_path = (path.parent / ctx.conv(("lab",), parse_str, top["lab"]))
    lab_text, lab_raw = _toml(lab_path)
    rep = ctx.conv(("repeat",), parse_int, top.get("repeat", 1))
    if rep < 1:
        ctx.fail(("repeat",), f"repeat must be at least 1, got {rep}")
    seed = ctx.conv(("seed",), parse_int, top["seed"]) if "seed" in top else \
        secrets.randbelow(2**31)
    shuffle = ctx.conv(("shuffle",), parse_bool, top.get("shuffle", True))
    pause = ctx.conv(("pause",), parse_time, top.get("pause", "0.5s"))
    labels = _labels(ctx, top.get("labels", {}))
    axes = read_matrix(ctx, top.get("matrix", {}))
    fixed_point: Point = ("--set", fixed)
    raw_tests = ctx.array(top.get("tests"), ("tests",)) if "tests" in top else []
    if not raw_tests:
        ctx.fail(("tests",), "an experiment needs at least one [[tests]] entry")
    variants = []
    for combo in itertools.product(*[[(k, p) for p in pts] for k, pts in axes.items()]):
        variants.append(_variant(ctx, lab_text, lab_raw, str(lab_path), raw_tests,
                                 top.get("samplers", {}), top.get("profile"),
                                 [("--set", fixed_point), *combo]))
    return Experiment(name=name, source=str(path), lab_source=str(lab_path), repeat=rep,
                      seed=seed, shuffle=shuffle, labels=labels, pause_s=pause,
                      variants=tuple(variants),
                      matrix={k: tuple(p[0] for p in pts) for k, pts in axes.items()})


def _variant(ctx: SpecContext, lab_text: str, lab_raw: dict[str, Any], lab_source: str,
             raw_tests: list[Any], raw_samplers: object, raw_profile: object,
             combo: Sequence[tuple[str, Point]]) -> Variant:
    lab_data = copy.deepcopy(lab_raw)
    tests_data = copy.deepcopy(raw_tests)
    values = {key: point[0] for key, point in combo if key != "--set"}
    label = kv.pairs(values, "")
    wireguard: bool | None = None
    setup: list[tuple[str, tuple[str, ...]]] = []
    try:
        for key, (shown, sets) in combo:
            where: tuple[str, ...] = () if key == "--set" else \
                ("matrix", key) if sets == {key: shown} else ("matrix", key, str(shown))
            wg, cmds = apply_point(ctx, sets, lab_data, tests_data, where)
            wireguard = wg if wg is not None else wireguard
            setup += cmds
        lab = load_lab_data(lab_data, lab_text, lab_source)
        if wireguard is not None:
            lab = with_wireguard(lab, wireguard)
        nodes = lab.node_names()
        for node, _ in setup:
            if node not in nodes:
                ctx.fail(("matrix",), f"setup.{node}: node '{node}' is not in the lab")
        samplers = read_samplers(ctx, raw_samplers, ("samplers",), nodes) if raw_samplers \
            else Samplers()
        profile = read_profile(ctx, raw_profile, ("profile",), nodes) \
            if raw_profile is not None else None
        tests: list[Test] = [read_test(ctx, raw, ("tests", i), nodes, samplers, profile)
                             for i, raw in enumerate(tests_data)]
        check_unique(ctx, tests)
        for i, test in enumerate(tests):
            _check_joined(ctx, test, tests_data[i], ("tests", i), lab)
            _check_family(ctx, test, tests_data[i], ("tests", i), lab)
    except SpecError as e:
        if not label:
            raise
        raise SpecError(f"{e.message} (in variant {label})", file=e.file, key=e.key,
                        line=e.line) from None
    return Variant(values=values, lab=lab, tests=tuple(tests), setup=tuple(setup))


def _check_family(ctx: SpecContext, test: Test, raw: object, path: tuple[str | int, ...],
                  lab: Lab) -> None:
    """An IPv6 flow in a lab without IPv6 addresses, or from or to a node without one,
    could never run: refuse it now, at the key that asked for it, rather than fail
    every run of it later. (Every kind's `family` comes here: ping, probe, web, tcp,
    udp, rrul and custom flows.)"""
    for f in test.flows:
        if f.family != 6:
            continue
        where = _key_path(raw, path, "family", 6) or path
        if not lab.addressing.ipv6:
            ctx.fail(where, "family = 6 needs IPv6, but the lab has ipv6 = false in "
                            "[addressing]")
        # A device whose address SSH tells (None) is known only at lab up.
        bare = next((n for n in (f.dst, f.src) if has_family(lab, n, 6) is False), None)
        if bare is not None:
            ctx.fail(where, f"family = 6 needs IPv6 at both ends of flow {f.name}, but "
                            f"node '{bare}' has no IPv6 address (none of its links "
                            f"carries IPv6)")


def _check_joined(ctx: SpecContext, test: Test, raw: object, path: tuple[str | int, ...],
                  lab: Lab) -> None:
    """A flow between nodes no path of links joins could never run (a node without
    links has no address at all)."""
    part = {n: n for n in lab.node_names()}

    def root(n: str) -> str:
        while part[n] != n:
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
        ends = [k for k in (_key_path(raw, path, "to", f.dst), _key_path(raw, path, "from", f.src))
                if k is not None and (lone is None or k[-1] == ("to" if lone == f.dst else "from"))]
        where = max(ends, key=len) if ends else path
        ctx.fail(where, f"node '{lone}' has no links, so no address to send to or from"
                 if lone else f"no path of links joins '{f.src}' and '{f.dst}'")


def _key_path(raw: object, path: tuple[str | int, ...], key: str, value: object = None
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
        found = _key_path(item, (*path, k), key, value)
        if found is not None:
            return found
    return None
