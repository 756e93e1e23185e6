"""The copy of a SQLite store kept before its schema is upgraded: NAME.db.bak-schemaN."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import tempfile
from pathlib import Path

import sqlalchemy as sa

from hoplab.errors import UsageError


def backup_path(database: str, version: int) -> Path:
    """Where the copy of the store at `database` with schema `version` is kept."""
    return Path(f"{database}.bak-schema{version}")


def copy(conn: sa.Connection, database: str, version: int) -> Path:
    """Copy the SQLite store `database` to backup_path(), called in its upgrading
    transaction (`conn`, which holds the write lock, no step run yet); a copy of the
    same name is replaced. UsageError if it cannot be written: no upgrade without it."""
    del conn    # holds the lock; the copy is read through a connection of its own
    target = backup_path(database, version)
    # SQLite's online backup, read through a second connection: the one holding the write
    # lock cannot be a backup's source (SQLITE_LOCKED), and a reader still sees the store
    # as committed (its -wal included) while no writer can change it. One
    # self-contained file, written beside the target and renamed, so a copy that failed
    # half way never stands as the backup.
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise _failed(target, exc) from None
    os.close(fd)
    try:
        source = sqlite3.connect(f"{Path(database).as_uri()}?mode=ro", uri=True)
        try:
            dest = sqlite3.connect(tmp)
            try:
                source.backup(dest)
            finally:
                dest.close()
        finally:
            source.close()
        # The copy holds what the store holds: readable by whom the store is.
        os.chmod(tmp, stat.S_IMODE(os.stat(database).st_mode))
        os.replace(tmp, target)
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _failed(target, exc) from None
    return target


def _failed(target: Path, exc: BaseException) -> UsageError:
    reason = getattr(exc, "strerror", None) or exc
    return UsageError(f"cannot keep a copy of the store at {target} before upgrading it "
                      f"(nothing was changed): {reason}")
