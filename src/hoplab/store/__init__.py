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
    from hoplab.store.store import Annotation, RunSummary, Store, open_store
    from hoplab.store.url import DEFAULT_PATH

__all__ = ["DEFAULT_PATH", "SCHEMA_VERSION", "Annotation", "RunSummary", "Store",
           "open_store"]

_HOMES = {"SCHEMA_VERSION": "schema", "Annotation": "store", "RunSummary": "store",
          "Store": "store",
          "open_store": "store", "DEFAULT_PATH": "url"}


def __getattr__(name: str) -> Any:
    # Imported on first use: SQLAlchemy alone takes 0.15 s or more to import, which a
    # command that only names the store (its --help, a module importing store.url)
    # should not pay.
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"hoplab.store.{home}"), name)
