"""The experiment matrix: which keys a variant may change, and how each is applied.

A matrix key is one of:
  * a lab parameter: ``hops`` (routers on the path, the lab must be a chain) or
    ``wireguard`` (per-hop WireGuard on every router-to-router link);
  * a path into the lab file: ``lab.links.1.rate``, ``lab.link_defaults.rate``;
  * a test option: ``tests.NAME.OPTION``, or a bare ``OPTION`` applied to every
    test whose kind has it (``flows``, ``duration``, ``congestion``...);
  * ``setup.NODE``: commands run in NODE once its lab is up (named variants only).
A matrix value is an array of values, or a table of named variants whose
entries are any of the keys above (``[matrix.qos.on]``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hoplab.spec.generate import MAX_NODES
from hoplab.spec.loader import SpecContext
from hoplab.spec.locate import Path
from hoplab.spec.model import Lab
from hoplab.spec.tests_loader import option_names, options_of
from hoplab.spec.units import kind, parse_bool, parse_command, parse_int

LAB_PARAMS = ("hops", "wireguard")
# One point on one matrix axis: the value shown to the user, and what it sets.
Point = tuple[Any, dict[str, Any]]
_STRIP = ("between", "addresses", "subnet4", "subnet6")


def read_matrix(ctx: SpecContext, raw: object) -> dict[str, list[Point]]:
    axes: dict[str, list[Point]] = {}
    for key, value in ctx.table(raw, ("matrix",), None).items():
        where: Path = ("matrix", key)
        if isinstance(value, list):
            if not value:
                ctx.fail(where, "an empty list of values")
            for i, v in enumerate(value):
                if isinstance(v, list | dict):
                    ctx.fail((*where, i), f"a matrix value is a plain value, got {kind(v)}; "
                                          f"use a table of named variants for more")
            _check_key(ctx, key, where)
            axes[key] = [(v, {key: v}) for v in value]
        elif isinstance(value, dict):
            if not value:
                ctx.fail(where, "an empty table of variants")
            points = []
            for name, sets in value.items():
                table = ctx.table(sets, (*where, name), None)
                for k in table:
                    _check_key(ctx, k, (*where, name, k))
                points.append((name, dict(table)))
            axes[key] = points
        else:
            ctx.fail(where, f"expected an array of values or a table of variants, "
                            f"got {kind(value)}")
    return axes


def _check_key(ctx: SpecContext, key: str, where: Path) -> None:
    head = key.split(".", 1)[0]
    if key in LAB_PARAMS or head in ("lab", "tests", "setup") or key in option_names():
        if head in ("lab", "tests", "setup") and "." not in key:
            ctx.fail(where, f"'{key}' needs a path, e.g. {head}.NAME...")
        return
    ctx.fail(where, f"unknown matrix key '{key}': use a lab parameter ({', '.join(LAB_PARAMS)})"
                    f", lab.PATH, tests.NAME.OPTION, setup.NODE, or a test option "
                    f"({', '.join(sorted(option_names()))})")


def _set_path(ctx: SpecContext, data: dict[str, Any], parts: Sequence[str], value: Any,
              where: Path, whole: str) -> None:
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                ctx.fail(where, f"'{whole}': no item {part} in a list of {len(node)}")
            idx = int(part)
            if last:
                node[idx] = value
            else:
                node = node[idx]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            ctx.fail(where, f"'{whole}': '{parts[i - 1]}' is {kind(node)}, not a table")


def apply_hops(data: dict[str, Any], hops: int, ctx: SpecContext, where: Path) -> None:
    """Rebuild a chain lab with `hops` routers between its two ends, keeping the options
    of the first and last links for the access links, and of the first router-to-router
    link (and the first router's node table) for every new router and inner link."""
    if hops < 1:
        ctx.fail(where, f"hops must be at least 1, got {hops}")
    if hops > MAX_NODES - 2:
        ctx.fail(where, f"hops is at most {MAX_NODES - 2}, got {hops}: a lab has at most "
                        f"{MAX_NODES} nodes, as [generate] makes them")
    gen = data.get("generate")
    if isinstance(gen, dict) and "chain" in gen:
        gen["chain"] = hops
        return
    links = [lk for lk in data.get("links", []) if isinstance(lk, dict)]
    adj: dict[str, list[str]] = {n: [] for n in data.get("nodes", {})}
    for lk in links:
        a, b = lk.get("between", ["", ""])
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    ends = sorted(n for n, peers in adj.items() if len(peers) == 1)
    if len(ends) != 2 or any(len(p) > 2 for p in adj.values()) or len(links) != len(adj) - 1:
        ctx.fail(where, "hops needs a lab that is one chain (a path of links between two "
                        "end nodes)")
    path = [ends[0]]
    while len(path) < len(adj):
        path.append(next(p for p in adj[path[-1]] if p not in path))

    def link(a: str, b: str) -> dict[str, Any]:
        raw = next(lk for lk in links if set(lk["between"]) == {a, b})
        return {k: copy.deepcopy(v) for k, v in raw.items() if k not in _STRIP}

    first, last = link(path[0], path[1]), link(path[-2], path[-1])
    inner = link(path[1], path[2]) if len(path) > 3 else {}
    nodes = data.get("nodes", {})
    router = copy.deepcopy(nodes.get(path[1], {})) if len(path) > 2 else {}
    names = [f"r{i + 1}" for i in range(hops)]
    data["nodes"] = {path[0]: nodes.get(path[0], {}),
                     **{n: copy.deepcopy(router) for n in names}, path[-1]: nodes.get(path[-1], {})}
    chain = [path[0], *names, path[-1]]
    new = [{"between": [chain[0], chain[1]], **first}]
    new += [{"between": [chain[i], chain[i + 1]], **copy.deepcopy(inner)}
            for i in range(1, len(chain) - 2)]
    new.append({"between": [chain[-2], chain[-1]], **last})
    data["links"] = new


def with_wireguard(lab: Lab, on: bool) -> Lab:
    """Per-hop WireGuard on (or off) for every link between two forwarding nodes."""
    degree: dict[str, int] = {}
    for lk in lab.links:
        degree[lk.a] = degree.get(lk.a, 0) + 1
        degree[lk.b] = degree.get(lk.b, 0) + 1
    links = tuple(replace(lk, wireguard=on) if degree[lk.a] > 1 and degree[lk.b] > 1 else lk
                  for lk in lab.links)
    return replace(lab, links=links)


def apply_to_tests(ctx: SpecContext, tests: list[dict[str, Any]], key: str, value: Any,
                   where: Path) -> None:
    if key.startswith("tests."):
        _, name, *rest = key.split(".")
        matches = [t for t in tests if t.get("name") == name]
        if not matches or not rest:
            ctx.fail(where, f"'{key}': no test named '{name}'" if not matches
                     else f"'{key}' needs an option after the test name")
        _set_path(ctx, matches[0], rest, value, where, key)
        return
    hit = False
    for t in tests:
        if key in options_of(str(t.get("kind"))):
            t[key] = value
            hit = True
    if not hit:
        ctx.fail(where, f"no test in this experiment has the option '{key}'")


def apply_point(ctx: SpecContext, sets: dict[str, Any], lab_data: dict[str, Any],
                tests: list[dict[str, Any]], where: Path
                ) -> tuple[bool | None, list[tuple[str, tuple[str, ...]]]]:
    """Apply one variant's settings to copies of the lab and test tables. Returns the
    wireguard setting (applied later, to the validated lab) and setup commands."""
    wireguard: bool | None = None
    setup: list[tuple[str, tuple[str, ...]]] = []
    # hops rebuilds the links, so lab paths (which may name a link) come after it.
    for key in sorted(sets, key=lambda k: k != "hops"):
        value = sets[key]
        here = (*where, key)
        if key == "hops":
            apply_hops(lab_data, ctx.conv(here, parse_int, value), ctx, here)
        elif key == "wireguard":
            wireguard = ctx.conv(here, parse_bool, value)
        elif key.startswith("lab."):
            _set_path(ctx, lab_data, key.split(".")[1:], copy.deepcopy(value), here, key)
        elif key.startswith("setup."):
            node = key.split(".", 1)[1]
            commands = value if isinstance(value, list) and value and isinstance(
                value[0], list) else [value]
            for i, c in enumerate(commands):
                setup.append((node, ctx.conv((*here, i), parse_command, c)))
        else:
            apply_to_tests(ctx, tests, key, copy.deepcopy(value), here)
    return wireguard, setup
