"""The --db option every command that reads or writes runs shares."""

from __future__ import annotations

import argparse
import os

ENV = "HOPLAB_DB"


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help=f"store: a SQLite path (default ./hoplab.db) or a "
                                     f"postgresql:// URL; ${ENV} if not given")


def url(args: argparse.Namespace) -> str | None:
    """--db, else $HOPLAB_DB (a team's PostgreSQL, set once), else the default."""
    value: str | None = args.db or os.environ.get(ENV) or None
    return value
