"""Fleet fixtures: a throwaway PostgreSQL server for the session (tests/helpers/postgres.py)
and a fresh database per test; the experiment the benches run (two namespaces, a 1 s
ping, 2 variants x 3 repetitions)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.lab import missing_requirement
from tests.helpers.postgres import PgServer, pg_bindir, running

LAB = """
name = "f"
[nodes.a]
[nodes.b]
[[links]]
between = ["a", "b"]
delay = "1ms"
"""

EXPERIMENT = """
lab = "lab.toml"
repeat = 3
pause = "0s"
[matrix]
interval = ["0.1s", "0.2s"]
[[tests]]
name = "p"
kind = "ping"
from = "a"
to = "b"
duration = "1s"
"""


@pytest.fixture(autouse=True)
def _root() -> None:
    # Benches build namespace labs.
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    if pg_bindir() is None:
        pytest.skip("PostgreSQL server not installed (no /usr/lib/postgresql/*/bin/initdb): "
                    "run `make setup`")
    with running() as server:
        yield server


@pytest.fixture
def db(pg_server: PgServer) -> str:
    """The URL of an empty PostgreSQL store."""
    return pg_server.fresh_database()


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    (tmp_path / "lab.toml").write_text(LAB)
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT)
    return path
