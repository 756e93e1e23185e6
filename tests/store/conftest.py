"""Store fixtures: every store test runs on SQLite and on a throwaway PostgreSQL server.

The PostgreSQL server is started once per session from the Debian package's
binaries (/usr/lib/postgresql/*/bin) in a temporary directory, as user
postgres when the tests run as root (PostgreSQL refuses to run as root), with
trust authentication on 127.0.0.1 only, and no fsync: it holds test data only.
Each test gets a freshly created database. Without the binaries the
PostgreSQL cases are skipped with a reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.store import Store, open_store
from tests.helpers.postgres import PgServer, pg_bindir, running


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    if pg_bindir() is None:
        pytest.skip("PostgreSQL server not installed (no /usr/lib/postgresql/*/bin/initdb): "
                    "run `make setup`")
    with running() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty store: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    server: PgServer = request.getfixturevalue("pg_server")
    return server.fresh_database()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with contextlib.closing(open_store(store_url)) as s:
        yield s
