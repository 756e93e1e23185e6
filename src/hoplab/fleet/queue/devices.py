"""One device serves one run at a time, across benches: a run whose lab has devices
holds a PostgreSQL advisory lock per device, taken in one sorted order (so two runs
wanting the same two devices never deadlock) and held on a connection of its own for
the run, which PostgreSQL releases if the bench dies.

A lock follows the device, not its spelling in a lab file: a device reached over SSH is
locked by every address and port its destination resolves to (ssh's own view of it,
`ssh -G`, for Host aliases and ports, then the resolver's), so `root@192.0.2.1`,
`192.0.2.1:22` and an alias `r1.lab` of it are one device; a labgrid device by its
coordinator and place. Who holds a device and who waits for it (bench, job, since when)
are rows of hoplab_fleet_device_holders and _waits, which `hoplab fleet` shows; a wait
longer than the bench's lock timeout fails the job with DeviceBusy, naming the holder."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from hoplab.errors import HoplabError
from hoplab.fleet.queue.db import connect
from hoplab.fleet.queue.schema import QUEUE
from hoplab.spec.model import Lab, Node

# How long a job waits for a device another run holds, unless the bench says otherwise
# (`hoplab worker --lock-timeout`).
LOCK_TIMEOUT_S = 3600.0
_LABGRID_PORT = 20408
_ENSURED: set[str | None] = set()


class DeviceBusy(HoplabError):
    """A device's lock was not had within the lock timeout."""


def _ssh_endpoint(node: Node) -> tuple[str, int]:
    """The host name and port SSH connects to for the node, as `ssh -G` resolves them
    (Host aliases of ~/.ssh/config); the lab file's, where ssh cannot say."""
    assert node.ssh is not None
    host, port = node.ssh.host, node.ssh.port or 22
    argv = ["ssh", "-G", *(["-p", str(node.ssh.port)] if node.ssh.port else []),
            node.ssh.destination]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return host, port
    said = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return said.get("hostname", host), int(said.get("port", port))


def _addresses(host: str, port: int) -> set[str]:
    """Every address:port the host resolves to; the name itself where it does not."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return {f"ssh:{host}:{port}"}
    return {f"ssh:[{a[4][0]}]:{port}" if ":" in str(a[4][0]) else f"ssh:{a[4][0]}:{port}"
            for a in found}


def node_keys(node: Node) -> set[str]:
    """The lock keys of one device node (none for a namespace node)."""
    if node.labgrid is not None:
        coordinator = (node.labgrid.coordinator or os.environ.get("LG_COORDINATOR")
                       or f"127.0.0.1:{_LABGRID_PORT}")
        if ":" not in coordinator:
            coordinator = f"{coordinator}:{_LABGRID_PORT}"
        return {f"labgrid:{coordinator}/{node.labgrid.place}"}
    if node.ssh is None:
        return set()
    return _addresses(*_ssh_endpoint(node))


def device_keys(lab: Lab) -> list[str]:
    """The lab's devices, each by what identifies it (node_keys), sorted."""
    return sorted(set().union(*(node_keys(n) for n in lab.nodes)))


def lock_id(key: str) -> int:
    """A signed 64-bit advisory lock id for a device key."""
    return int.from_bytes(hashlib.sha256(f"hoplab-device:{key}".encode()).digest()[:8],
                          "big", signed=True)


def _holder(conn: psycopg.Connection[Any], key: str) -> str:
    row = conn.execute(
        "SELECT bench, job_id, since FROM hoplab_fleet_device_holders WHERE device = %s "
        "AND backend IN (SELECT pid FROM pg_stat_activity) ORDER BY since LIMIT 1",
        (key,)).fetchone()
    if row is None:
        return "another run"
    job = f" (job {row[1]})" if row[1] is not None else ""
    return f"bench {row[0]}{job} since {row[2]:%Y-%m-%d %H:%M:%S %Z}"


def _take(conn: psycopg.Connection[Any], key: str, who: dict[str, Any],
          timeout_s: float) -> None:
    """One device's lock, waiting at most `timeout_s`; the wait and then the hold noted."""
    row = {"device": key, **who}
    conn.execute("INSERT INTO hoplab_fleet_device_waits (device, backend, bench, job_id) "
                 "VALUES (%(device)s, pg_backend_pid(), %(bench)s, %(job)s) ON CONFLICT "
                 "(device, backend) DO UPDATE SET since = now(), bench = EXCLUDED.bench, "
                 "job_id = EXCLUDED.job_id", row)
    try:
        conn.execute(f"SET lock_timeout = {max(1, int(timeout_s * 1000))}")
        conn.execute("SELECT pg_advisory_lock(%s)", (lock_id(key),))
    except psycopg.errors.LockNotAvailable:
        raise DeviceBusy(f"device {key} is held by {_holder(conn, key)}: waited more than "
                         f"the lock timeout ({timeout_s:g} s)") from None
    finally:
        conn.execute("RESET lock_timeout")
        conn.execute("DELETE FROM hoplab_fleet_device_waits WHERE device = %(device)s AND "
                     "backend = pg_backend_pid()", row)
    conn.execute("INSERT INTO hoplab_fleet_device_holders (device, backend, bench, job_id) "
                 "VALUES (%(device)s, pg_backend_pid(), %(bench)s, %(job)s) ON CONFLICT "
                 "(device, backend) DO UPDATE SET since = now(), bench = EXCLUDED.bench, "
                 "job_id = EXCLUDED.job_id", row)


@contextmanager
def holding(db_url: str | None, keys: list[str], *, bench: str = "?",
            job_id: int | None = None, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Every lock of `keys`, taken in sorted order (waiting at most `timeout_s` for
    each; DeviceBusy after), for the block."""
    if not keys:
        yield
        return
    # The holders' and waits' tables, made once a process.
    with connect(db_url, tables=[] if db_url in _ENSURED else [QUEUE]) as conn:
        _ENSURED.add(db_url)
        who = {"bench": bench, "job": job_id}
        try:
            for key in sorted(keys):
                _take(conn, key, who, timeout_s)
            yield
        finally:
            conn.execute("DELETE FROM hoplab_fleet_device_holders WHERE backend = "
                         "pg_backend_pid()")
            conn.execute("SELECT pg_advisory_unlock_all()")
