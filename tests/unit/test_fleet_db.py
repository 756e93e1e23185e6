"""The fleet's one way to its store (hoplab/fleet/queue/db.py): every part of the fleet
connects through it, and a store it cannot reach is said in one wording whichever part
asked (the schedules' connection once said "cannot reach the store", the queue's
"cannot reach the fleet's store"; device locks let psycopg's error through)."""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest
from psycopg.rows import dict_row

from hoplab.errors import UsageError
from hoplab.fleet.bisect.jobs import RESULTS
from hoplab.fleet.queue.db import Tables, connect
from hoplab.fleet.queue.schema import QUEUE
from hoplab.fleet.schedule.tables import SCHEDULES

FLEET = Path(__file__).resolve().parents[2] / "src" / "hoplab" / "fleet"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("tables", [[QUEUE], [SCHEDULES], [QUEUE, RESULTS], []],
                         ids=["queue", "schedules", "bisect", "none"])
def test_an_unreachable_store_is_said_one_way(tables: list[Tables]) -> None:
    url = f"postgresql://bench:s3cret@127.0.0.1:{_closed_port()}/hoplab"
    with pytest.raises(UsageError) as got:
        connect(url, tables=tables, row_factory=dict_row)
    said = str(got.value)
    assert said.startswith("cannot reach the fleet's store: "), said
    assert "s3cret" not in said and "\n" not in said


def test_a_sqlite_store_is_refused_naming_postgresql(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="the fleet needs a PostgreSQL store"):
        connect(str(tmp_path / "runs.db"))


def test_only_db_py_opens_a_connection() -> None:
    """No other module of the fleet calls psycopg.connect."""
    callers = []
    for path in FLEET.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "connect" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "psycopg":
                callers.append(str(path.relative_to(FLEET)))
    assert callers == ["queue/db.py"]


def test_each_part_declares_its_tables_one_way() -> None:
    assert all(isinstance(t, Tables) and t.statements for t in (QUEUE, SCHEDULES, RESULTS))
    # The locks hoplabs before this one took, so that old and new benches still make
    # the tables one at a time.
    assert QUEUE.lock == 0x686F706C6162 and SCHEDULES.lock == "hoplab schedules"
