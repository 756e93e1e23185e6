"""The --db option every command that reads or writes runs shares, and how each opens it:
a command that only reads never creates, upgrades or writes a store."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from hoplab.errors import UsageError

if TYPE_CHECKING:
    from hoplab.store import Store

ENV = "HOPLAB_DB"


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help=f"store: a SQLite path (default ./hoplab.db) or a "
                                     f"postgresql:// URL; ${ENV} if not given")
    parser.add_argument("--db-file", metavar="FILE",
                        help="the store's URL read from FILE's first line instead, so that "
                             "it is in no command line (docs/fleet.md#credentials)")


def url(args: argparse.Namespace) -> str | None:
    """--db, else --db-file's, else $HOPLAB_DB (a team's PostgreSQL, set once), else the
    default."""
    db_file = getattr(args, "db_file", None)
    if args.db and db_file:
        raise UsageError("--db and --db-file: give one of them")
    if db_file:
        return _read_url(Path(db_file))
    value: str | None = args.db or os.environ.get(ENV) or None
    return value


def _read_url(path: Path) -> str:
    """The URL on `path`'s first line; refused when others may read a password in it."""
    from hoplab.store.url import has_password

    try:
        mode = path.stat().st_mode
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--db-file {path}: cannot read it ({type(e).__name__})") from None
    found = lines[0].strip() if lines else ""
    if not found:
        raise UsageError(f"--db-file {path}: its first line is empty")
    if has_password(found) and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(f"--db-file {path}: it holds a password and others may read it "
                         f"(mode {stat.S_IMODE(mode):o}); chmod 600 {path}")
    return found


def no_password_in_argv(args: argparse.Namespace, command: str) -> None:
    """A long-lived process (a bench) refuses a password on its command line: every
    process of the machine reads /proc/PID/cmdline, the jobs it runs too."""
    from hoplab.store.url import has_password

    if args.db and has_password(args.db):
        raise UsageError(f"{command} --db: the URL holds a password, which every process "
                         "on this machine can read in its command line (/proc/PID/"
                         f"cmdline, ps), the jobs it runs included: give it by ${ENV}, "
                         "--db-file FILE (mode 600) or libpq's ~/.pgpass or service file "
                         "(docs/fleet.md#credentials)")


def reading(args: argparse.Namespace) -> Store:
    """The store, opened read-only: a missing one, an empty one or one of an older schema
    is refused (exit 2) with what to do."""
    from hoplab.store import open_store

    return open_store(url(args), read_only=True)


def writing(args: argparse.Namespace) -> Store:
    """The store, opened to write: created if missing, an older schema upgraded after a
    copy of a SQLite file is kept, which is said on stderr."""
    from hoplab.store import open_store

    store = open_store(url(args))
    said_upgraded(store)
    return store


def said_upgraded(store: Store, out: TextIO | None = None) -> None:
    """One line (on stderr unless `out`) when opening `store` upgraded its schema."""
    if 0 < store.migrated_from < store.schema_version:
        kept = f"; the file as it was is kept as {store.backup}" if store.backup else ""
        print(f"hoplab: upgraded store {store.describe()} from schema {store.migrated_from} "
              f"to {store.schema_version}{kept}", file=out or sys.stderr)
