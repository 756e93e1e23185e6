"""Where runs are kept: SQLite (default, ./hoplab.db) or PostgreSQL, same schema.

    with open_store("runs.db") as store:
        run_id = store.save_run(run)
        again = store.get_run(run_id)
        rows = store.list_runs({"experiment": "wan", "hops": "2"})
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hoplab.store.schema import SCHEMA_VERSION
    from hoplab.store.store import (
        Annotation,
        Baseline,
        Kept,
        RunSummary,
        Store,
        check_run,
        open_store,
    )
    from hoplab.store.url import DEFAULT_PATH

__all__ = ["DEFAULT_PATH", "SCHEMA_VERSION", "Annotation", "Baseline", "Kept", "RunSummary",
           "Store", "check_run", "open_store"]



def __getattr__(name: str) -> Any:
    # Imported on first use: SQLAlchemy alone takes 0.15 s or more to import, which a
    # command that only names the store (its --help, a module importing store.url)
    # should not pay.
    if name == "SCHEMA_VERSION":
        from hoplab.store.schema import SCHEMA_VERSION

        return SCHEMA_VERSION
    if name in ("Annotation", "Baseline", "Kept", "RunSummary", "Store", "check_run",
                "open_store"):
        from hoplab.store import store

        return getattr(store, name)
    if name == "DEFAULT_PATH":
        from hoplab.store.url import DEFAULT_PATH

        return DEFAULT_PATH
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
