"""The store's password never on a bench's command line (issue 29, part 8): a worker
refuses one in --db, takes the URL from $HOPLAB_DB, --db-file or libpq's service file,
and what its jobs start inherits none of it. (The throwaway server trusts 127.0.0.1, so
any password gets in: what is checked is where it goes.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hoplab.errors import UsageError
from tests.fleet.benches import bench_state, ok_runs, until
from tests.helpers.lab import HOPLAB, hoplab, new_lab_name
from tests.helpers.postgres import DB_NAME, PgServer

SECRET = "s3cr3t-pw"


def _stored(db: str, name: str) -> int:
    """The bench's ok runs; 0 before it has made the store's tables."""
    try:
        return ok_runs(db, name)
    except UsageError:
        return 0


def _with_password(db: str) -> str:
    return db.replace("postgres@", f"postgres:{SECRET}@")


def test_a_worker_refuses_a_password_on_its_command_line() -> None:
    for url in (f"postgresql://u:{SECRET}@127.0.0.1:1/db",
                f"postgresql://u@127.0.0.1:1/db?password={SECRET}"):
        got = hoplab("worker", "--bench", "b1", "--db", url)
        assert got.returncode == 2, got.stderr
        assert "worker --db: the URL holds a password" in got.stderr
        assert "/proc/PID/cmdline" in got.stderr and SECRET not in got.stderr


@contextmanager
def _bench(name: str, *args: str, env: dict[str, str] | None = None
           ) -> Iterator[subprocess.Popen[str]]:
    """A bench (its lab named after it); stopped, reaped and its lab removed after."""
    proc = subprocess.Popen([*HOPLAB, "worker", "--bench", name, "--heartbeat", "1", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)     # its lab taken down
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=60)
        hoplab("clean", name)


def _env_job(db: str, experiment: Path, seen: Path) -> None:
    experiment.write_text(experiment.read_text().replace("repeat = 3", "repeat = 1").replace(
        '[matrix]\ninterval = ["0.1s", "0.2s"]',
        f'[matrix.s.on]\n"setup.a" = [["sh", "-c", "env > {seen}"]]'))
    got = hoplab("submit", str(experiment), "--db", db)
    assert got.returncode == 0, got.stderr


def test_a_bench_from_the_environment_keeps_the_password_from_its_jobs(
        db: str, experiment: Path, tmp_path: Path) -> None:
    seen = tmp_path / "env.txt"
    _env_job(db, experiment, seen)
    name = new_lab_name()
    with _bench(name, env={"HOPLAB_DB": _with_password(db)}) as proc:
        until("its run stored", lambda: _stored(db, name) == 1, timeout=120)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert SECRET.encode() not in cmdline
    text = seen.read_text()
    assert "HOPLAB_DB" not in text and SECRET not in text


def test_a_bench_from_a_db_file(db: str, experiment: Path, tmp_path: Path) -> None:
    url_file = tmp_path / "store.url"
    url_file.write_text(_with_password(db) + "\n")
    url_file.chmod(0o644)
    name = new_lab_name()
    got = hoplab("worker", "--bench", name, "--db-file", str(url_file))
    assert got.returncode == 2 and f"chmod 600 {url_file}" in got.stderr
    assert SECRET not in got.stderr
    url_file.chmod(0o600)
    seen = tmp_path / "env.txt"
    _env_job(db, experiment, seen)
    with _bench(name, "--db-file", str(url_file)) as proc:
        until("its run stored", lambda: _stored(db, name) == 1, timeout=120)
        assert SECRET.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert SECRET not in seen.read_text()


def test_libpqs_service_file_names_the_store(pg_server: PgServer, db: str,
                                             experiment: Path, tmp_path: Path) -> None:
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[hoplab29]\nhost=127.0.0.1\nport={pg_server.port}\n"
                        f"dbname={DB_NAME}\nuser=postgres\n")
    env = {**os.environ, "PGSERVICEFILE": str(services)}
    url = "postgresql://?service=hoplab29"
    got = subprocess.run([*HOPLAB, "submit", str(experiment), "--db", url, "--json"],
                         capture_output=True, text=True, timeout=120, env=env, check=False)
    assert got.returncode == 0, got.stderr
    name = new_lab_name()
    with _bench(name, "--db", url, env={"PGSERVICEFILE": str(services)}):
        until("the bench idle or busy", lambda: bench_state(db, name) in ("idle", "busy"))
    status = subprocess.run([*HOPLAB, "fleet", "--db", url, "--json"], capture_output=True,
                            text=True, timeout=120, env=env, check=False)
    assert status.returncode == 0, status.stderr
    assert name in {b["name"] for b in json.loads(status.stdout)["benches"]}
