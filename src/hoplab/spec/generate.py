"""Topology generators: pure functions from a few numbers to nodes and links.

Each returns a Topology of node names (in a stable, readable order) and links
as (a, b) name pairs; the loader turns them into model objects and applies
[link_defaults] and any [nodes.X] options. Bad input raises GenerateError, a
ValueError that also says where in the [generate] table the problem is, so
the loader can point at it (e.g. generate.mesh.degree).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple

from hoplab.spec.units import parse_int, parse_number

GENERATORS = ("chain", "star", "grid", "mesh")
MESH_KEYS = ("nodes", "degree", "seed")
# Every node is a network namespace with processes; far beyond this a lab is a typo.
MAX_NODES = 1000
# Each link is a veth pair with a subnet every node routes to: a mesh of 1000 nodes and
# degree 999 (499,500 links) took 10 s and 385 MB to load, and more to plan.
MAX_LINKS = 10_000


class Topology(NamedTuple):
    nodes: tuple[str, ...]
    links: tuple[tuple[str, str], ...]


class GenerateError(ValueError):
    """Bad generator input; `where` is the key path inside [generate], e.g. ("grid", 1)."""

    def __init__(self, where: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.where = where


def _check_total(total: int, where: tuple[str | int, ...] = ()) -> None:
    if total > MAX_NODES:
        raise GenerateError(where, f"this makes {total} nodes; the limit is {MAX_NODES}")


def chain(n: int) -> Topology:
    """client - r1 - ... - rN - server; n = 0 links client and server directly."""
    if n < 0:
        raise GenerateError((), f"a chain needs 0 or more routers, got {n}")
    _check_total(n + 2)
    nodes = ("client", *(f"r{i}" for i in range(1, n + 1)), "server")
    return Topology(nodes, tuple(itertools.pairwise(nodes)))


def star(n: int) -> Topology:
    """A "hub" with leaves h1..hN, linked hub-h1, hub-h2, ..."""
    if n < 1:
        raise GenerateError((), f"a star needs at least 1 leaf, got {n}")
    _check_total(n + 1)
    leaves = tuple(f"h{i}" for i in range(1, n + 1))
    return Topology(("hub", *leaves), tuple(("hub", leaf) for leaf in leaves))


def grid(rows: int, cols: int) -> Topology:
    """Nodes r{row}-{col} (1-based), each linked right then down, in row-major order."""
    if rows < 1:
        raise GenerateError((0,), f"a grid needs at least 1 row, got {rows}")
    if cols < 1:
        raise GenerateError((1,), f"a grid needs at least 1 column, got {cols}")
    _check_total(rows * cols)

    def name(r: int, c: int) -> str:
        return f"r{r}-{c}"

    nodes: list[str] = []
    links: list[tuple[str, str]] = []
    for r in range(1, rows + 1):
        for c in range(1, cols + 1):
            nodes.append(name(r, c))
            if c < cols:
                links.append((name(r, c), name(r, c + 1)))
            if r < rows:
                links.append((name(r, c), name(r + 1, c)))
    return Topology(tuple(nodes), tuple(links))


# Pure and, for a large mesh, the dearest part of loading (its spare pairs are N^2/2):
# every variant of an experiment asks for the same one.
@lru_cache(maxsize=8)
def mesh(nodes: int, degree: float, seed: int) -> Topology:
    """A random connected mesh of n1..nN with average degree close to `degree`.

    A random spanning tree comes first so the mesh is always connected; random
    extra edges are then added until there are round(nodes * degree / 2) edges.
    The same arguments always give the same mesh (random.Random(seed)).
    """
    if nodes < 2:
        raise GenerateError(("nodes",), f"a mesh needs at least 2 nodes, got {nodes}")
    _check_total(nodes, ("nodes",))
    if degree <= 0:
        raise GenerateError(("degree",), f"the average degree must be positive, got {degree}")
    if degree > nodes - 1:
        raise GenerateError(("degree",), f"the average degree of {nodes} nodes is at most "
                                         f"{nodes - 1}, got {degree}")
    if round(nodes * degree / 2) > MAX_LINKS:
        raise GenerateError(("degree",), f"{nodes} nodes of average degree {degree} make "
                                         f"{round(nodes * degree / 2)} links; the limit is "
                                         f"{MAX_LINKS} (each a veth pair with a subnet "
                                         f"every node routes to)")
    rng = random.Random(seed)
    names = tuple(f"n{i}" for i in range(1, nodes + 1))
    order = list(range(nodes))
    rng.shuffle(order)
    edges: set[tuple[int, int]] = set()
    for k in range(1, nodes):
        other = order[rng.randrange(k)]
        edges.add((min(order[k], other), max(order[k], other)))
    # A tree already has nodes-1 edges, so a low degree still yields a connected mesh.
    target = max(round(nodes * degree / 2), nodes - 1)
    spare = [(i, j) for i in range(nodes) for j in range(i + 1, nodes) if (i, j) not in edges]
    rng.shuffle(spare)
    edges.update(spare[: target - len(edges)])
    links = tuple((names[i], names[j]) for i, j in sorted(edges))
    return Topology(names, links)


def from_table(table: Mapping[str, object]) -> Topology:
    """The topology a [generate] table asks for (exactly one of GENERATORS)."""
    unknown = [k for k in table if k not in GENERATORS]
    if unknown:
        raise GenerateError((unknown[0],), f"unknown generator; use one of {', '.join(GENERATORS)}")
    if not table:
        raise GenerateError((), "choose one generator: chain, star, grid or mesh")
    kind, value = next(iter(table.items()))
    if len(table) > 1:
        raise GenerateError((list(table)[1],),
                            f"only one generator per file, and '{kind}' comes first")
    try:
        if kind == "chain":
            return chain(_value(value, ()))
        if kind == "star":
            return star(_value(value, ()))
        if kind == "grid":
            if not isinstance(value, list) or len(value) != 2:
                raise GenerateError((), "expected [rows, cols], e.g. [3, 3]")
            return grid(_value(value[0], (0,)), _value(value[1], (1,)))
        return _mesh(value)
    except GenerateError as e:
        raise GenerateError((kind, *e.where), str(e)) from None


def _value(value: object, where: tuple[str | int, ...]) -> int:
    try:
        return parse_int(value)
    except ValueError as e:
        raise GenerateError(where, str(e)) from None


def _mesh(value: object) -> Topology:
    if not isinstance(value, dict):
        raise GenerateError((), "expected a table like { nodes = 12, degree = 3, seed = 1 }")
    unknown = [k for k in value if k not in MESH_KEYS]
    if unknown:
        raise GenerateError((unknown[0],), f"unknown key; allowed keys: {', '.join(MESH_KEYS)}")
    if "nodes" not in value:
        raise GenerateError((), 'missing required key "nodes"')
    count = _value(value["nodes"], ("nodes",))
    try:
        # Default 3, the degree of a sparse but redundant mesh; a small mesh gets a full one.
        degree = parse_number(value.get("degree", max(min(3, count - 1), 1)))
    except ValueError as e:
        raise GenerateError(("degree",), str(e)) from None
    return mesh(count, degree, _value(value.get("seed", 0), ("seed",)))
