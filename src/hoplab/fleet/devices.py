"""One device serves one run at a time, across benches: a run whose lab has devices
holds a PostgreSQL advisory lock per device, keyed by the device's address, taken in
one sorted order (so two runs wanting the same two devices never deadlock) and held on
a connection of its own for the run, which PostgreSQL releases if the bench dies."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from hoplab.fleet.app import connect_kwargs, conninfo
from hoplab.spec.model import Lab


def device_keys(lab: Lab) -> list[str]:
    """The lab's devices, each by its address (user@host:port as SSH reaches it), sorted."""
    keys = {f"{n.ssh.host}:{n.ssh.port or 22}" for n in lab.nodes if n.ssh is not None}
    return sorted(keys)


def lock_id(key: str) -> int:
    """A signed 64-bit advisory lock id for a device key."""
    return int.from_bytes(hashlib.sha256(f"hoplab-device:{key}".encode()).digest()[:8],
                          "big", signed=True)


@contextmanager
def holding(db_url: str | None, keys: list[str]) -> Iterator[None]:
    """Every lock of `keys`, taken in sorted order (waiting for each), for the block."""
    if not keys:
        yield
        return
    with psycopg.connect(conninfo(db_url), autocommit=True, **connect_kwargs()) as conn:
        for key in sorted(keys):
            conn.execute("SELECT pg_advisory_lock(%s)", (lock_id(key),))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock_all()")
