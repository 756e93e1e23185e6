from __future__ import annotations

from collections.abc import Callable

import pytest

from hoplab.spec.generate import (
    GenerateError,
    Topology,
    chain,
    from_table,
    grid,
    mesh,
    star,
)


def _connected(topo: Topology) -> bool:
    adjacent: dict[str, set[str]] = {n: set() for n in topo.nodes}
    for a, b in topo.links:
        adjacent[a].add(b)
        adjacent[b].add(a)
    seen, todo = {topo.nodes[0]}, [topo.nodes[0]]
    while todo:
        for nxt in adjacent[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen == set(topo.nodes)


def test_chain() -> None:
    assert chain(3) == Topology(
        ("client", "r1", "r2", "r3", "server"),
        (("client", "r1"), ("r1", "r2"), ("r2", "r3"), ("r3", "server")),
    )


def test_chain_zero_is_direct() -> None:
    assert chain(0) == Topology(("client", "server"), (("client", "server"),))


def test_star() -> None:
    assert star(3) == Topology(("hub", "h1", "h2", "h3"),
                               (("hub", "h1"), ("hub", "h2"), ("hub", "h3")))


def test_grid_row_major_right_then_down() -> None:
    topo = grid(2, 3)
    assert topo.nodes == ("r1-1", "r1-2", "r1-3", "r2-1", "r2-2", "r2-3")
    assert topo.links == (
        ("r1-1", "r1-2"), ("r1-1", "r2-1"),
        ("r1-2", "r1-3"), ("r1-2", "r2-2"),
        ("r1-3", "r2-3"),
        ("r2-1", "r2-2"),
        ("r2-2", "r2-3"),
    )


def test_grid_3x3_has_12_links() -> None:
    topo = grid(3, 3)
    assert len(topo.nodes) == 9
    assert len(topo.links) == 12


def test_grid_single_node() -> None:
    assert grid(1, 1) == Topology(("r1-1",), ())


@pytest.mark.parametrize(("nodes", "degree", "seed"),
                         [(12, 3, 1), (12, 3, 2), (2, 1, 0), (30, 4.5, 7), (10, 1, 3), (6, 5, 9)])
def test_mesh_properties(nodes: int, degree: float, seed: int) -> None:
    topo = mesh(nodes, degree, seed)
    assert topo.nodes == tuple(f"n{i}" for i in range(1, nodes + 1))
    assert _connected(topo)
    pairs = [frozenset(link) for link in topo.links]
    assert all(len(p) == 2 for p in pairs), "self loop"
    assert len(set(pairs)) == len(pairs), "duplicate edge"
    assert len(topo.links) == max(round(nodes * degree / 2), nodes - 1)


def test_mesh_is_deterministic_per_seed() -> None:
    assert mesh(12, 3, 1) == mesh(12, 3, 1)
    assert mesh(12, 3, 1) != mesh(12, 3, 2)


def test_mesh_known_links() -> None:
    # Pinned so that a change of algorithm (and so of every seeded lab) is noticed.
    assert mesh(6, 2, 1).links == (
        ("n1", "n4"), ("n1", "n5"), ("n2", "n4"), ("n2", "n5"), ("n3", "n4"), ("n4", "n6"),
    )


def test_mesh_full_degree_is_complete() -> None:
    assert len(mesh(5, 4, 0).links) == 10


@pytest.mark.parametrize(
    ("call", "where", "fragment"),
    [
        (lambda: chain(-1), (), "0 or more routers"),
        (lambda: star(0), (), "at least 1 leaf"),
        (lambda: grid(0, 3), (0,), "at least 1 row"),
        (lambda: grid(3, -2), (1,), "at least 1 column"),
        (lambda: mesh(1, 1, 0), ("nodes",), "at least 2 nodes"),
        (lambda: mesh(5, 0, 0), ("degree",), "must be positive"),
        (lambda: mesh(5, 5, 0), ("degree",), "at most 4"),
        (lambda: chain(5000), (), "the limit is 1000"),
        (lambda: grid(100, 100), (), "this makes 10000 nodes"),
    ],
)
def test_errors(call: Callable[[], Topology], where: tuple[str | int, ...],
                fragment: str) -> None:
    with pytest.raises(GenerateError) as err:
        call()
    assert err.value.where == where
    assert fragment in str(err.value)


def test_from_table() -> None:
    assert from_table({"chain": 2}) == chain(2)
    assert from_table({"star": 2}) == star(2)
    assert from_table({"grid": [2, 2]}) == grid(2, 2)
    assert from_table({"mesh": {"nodes": 12, "degree": 3, "seed": 1}}) == mesh(12, 3, 1)
    # Defaults: degree 3 (at most nodes - 1), seed 0.
    assert from_table({"mesh": {"nodes": 8}}) == mesh(8, 3, 0)
    assert from_table({"mesh": {"nodes": 3}}) == mesh(3, 2, 0)


@pytest.mark.parametrize(
    ("table", "where", "fragment"),
    [
        ({}, (), "choose one generator"),
        ({"ring": 3}, ("ring",), "unknown generator"),
        ({"chain": 2, "star": 3}, ("star",), "only one generator per file, and 'chain'"),
        ({"chain": -1}, ("chain",), "0 or more routers"),
        ({"chain": "3"}, ("chain",), "expected an integer"),
        ({"chain": True}, ("chain",), "expected an integer"),
        ({"grid": [3]}, ("grid",), "expected [rows, cols]"),
        ({"grid": [3, "x"]}, ("grid", 1), "expected an integer"),
        ({"grid": [3, 0]}, ("grid", 1), "at least 1 column"),
        ({"mesh": 5}, ("mesh",), "expected a table"),
        ({"mesh": {"degree": 2}}, ("mesh",), 'missing required key "nodes"'),
        ({"mesh": {"nodes": 5, "seeds": 1}}, ("mesh", "seeds"), "unknown key"),
        ({"mesh": {"nodes": 5, "degree": "3"}}, ("mesh", "degree"), "expected a number"),
        ({"mesh": {"nodes": 5, "degree": 9}}, ("mesh", "degree"), "at most 4"),
        ({"mesh": {"nodes": 5, "seed": 1.5}}, ("mesh", "seed"), "expected an integer"),
    ],
)
def test_from_table_errors(table: dict[str, object], where: tuple[str | int, ...],
                           fragment: str) -> None:
    with pytest.raises(GenerateError) as err:
        from_table(table)
    assert err.value.where == where
    assert fragment in str(err.value)
