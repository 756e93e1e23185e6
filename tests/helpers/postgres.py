"""A throwaway PostgreSQL server from the Debian package's binaries, for tests and benches.

Started in a temporary directory as user postgres when run as root (PostgreSQL
refuses to run as root), with trust authentication on 127.0.0.1 only, and no
fsync: it holds test data only.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

DB_NAME = "hoplab_test"


def pg_bindir() -> Path | None:
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not found:
        return None
    # The newest major version: directories are named after it.
    newest = max(found, key=lambda p: int(Path(p).parent.parent.name.split(".")[0]))
    return Path(newest).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class PgServer:
    bindir: Path
    base: Path
    port: int
    as_user: list[str]
    shared_buffers: str = "32MB"
    max_connections: int = 40

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DB_NAME}"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [*self.as_user, str(self.bindir / args[0]), *args[1:]]
        return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60,
                              cwd=self.base)

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        # Through the unix socket in base: the maintenance database, outside any test database.
        return psycopg.connect(host=str(self.base), port=self.port, user="postgres",
                               dbname="postgres", autocommit=True)

    def fresh_database(self) -> str:
        with self.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {DB_NAME}")
        return self.url


def _check(proc: subprocess.CompletedProcess[str], what: str, log: Path | None = None) -> None:
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
        raise RuntimeError(f"{what} failed ({proc.returncode}): {proc.stderr or proc.stdout}"
                           f"\n{tail}")


def _start(server: PgServer) -> None:
    log = server.base / "server.log"
    options = " ".join([
        "-c listen_addresses=127.0.0.1", f"-p {server.port}",
        f"-c unix_socket_directories={server.base}",
        # Test data only: durability is not needed and costs seconds per test run.
        "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off",
        f"-c max_connections={server.max_connections}",
        f"-c shared_buffers={server.shared_buffers}",
    ])
    proc = server.run("pg_ctl", "-D", str(server.base / "data"), "-l", str(log), "-w",
                      "-t", "30", "-o", options, "start")
    _check(proc, "pg_ctl start", log)


@contextmanager
def running(shared_buffers: str = "32MB", max_connections: int = 40) -> Iterator[PgServer]:
    """A started server with an empty database DB_NAME; stopped and removed after."""
    bindir = pg_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server not installed (no /usr/lib/postgresql/*/bin/"
                           "initdb): run `make setup`")
    as_user: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="hoplab-pg-"))
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    server = PgServer(bindir, base, 0, as_user, shared_buffers, max_connections)
    started = False
    try:
        t0 = time.monotonic()
        _check(server.run("initdb", "-D", str(base / "data"), "-U", "postgres", "-A", "trust",
                          "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"),
               "initdb")
        for attempt in range(3):
            # The free port can be taken between probing and binding: try another.
            server.port = _free_port()
            try:
                _start(server)
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        started = True
        server.fresh_database()
        print(f"\nPostgreSQL {bindir.parent.name} on port {server.port} in "
              f"{time.monotonic() - t0:.1f} s")
        yield server
    finally:
        if started:
            server.run("pg_ctl", "-D", str(base / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)
