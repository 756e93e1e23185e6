"""`hoplab migrate`: bring a store of an older schema up to this hoplab's."""

from __future__ import annotations

import argparse
import sys

from hoplab.cli import store_arg


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "migrate", help="upgrade a store of an older schema (keeping a copy of a SQLite file)",
        description="Upgrade the store to this hoplab's schema, in one transaction. A "
                    "SQLite file is first copied to FILE.bak-schemaN (N: its schema "
                    "before); a PostgreSQL database is not copied (pg_dump it first). "
                    "Commands that only read refuse an older store; `hoplab run` and "
                    "`hoplab import` upgrade it the same way.")
    store_arg.add(p)
    p.set_defaults(func=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    from hoplab.store import open_store

    # A store that is not there is a typo, not a store to create.
    with open_store(store_arg.url(args), create=False) as store:
        if store.migrated_from == store.schema_version:
            print(f"store {store.describe()} is at schema {store.schema_version}, this "
                  f"hoplab's: nothing to do")
        else:
            store_arg.said_upgraded(store, sys.stdout)
            if store.migrated_from < 6:
                # Schema 6 keeps each series' judged changes (the dashboard's home reads
                # them): judged once now rather than by every server that starts.
                from hoplab.analysis.changes import keep_judged
                from hoplab.kinds import HEADLINES

                judged = keep_judged(store, HEADLINES)
                print(f"judged {judged} series for the dashboard's home, stored beside the runs")
    return 0
