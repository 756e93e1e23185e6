"""The --db option every command that reads or writes runs shares, and how each opens it:
a command that only reads never creates, upgrades or writes a store."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from hoplab.store import Store

ENV = "HOPLAB_DB"


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help=f"store: a SQLite path (default ./hoplab.db) or a "
                                     f"postgresql:// URL; ${ENV} if not given")


def url(args: argparse.Namespace) -> str | None:
    """--db, else $HOPLAB_DB (a team's PostgreSQL, set once), else the default."""
    value: str | None = args.db or os.environ.get(ENV) or None
    return value


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
