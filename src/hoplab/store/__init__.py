"""Where runs are kept: SQLite (default, ./hoplab.db) or PostgreSQL, same schema.

    with open_store("runs.db") as store:
        run_id = store.save_run(run)
        again = store.get_run(run_id)
        rows = store.list_runs({"experiment": "wan", "hops": "2"})
"""

from hoplab.store.schema import SCHEMA_VERSION
from hoplab.store.store import RunSummary, Store, open_store
from hoplab.store.url import DEFAULT_PATH

__all__ = ["DEFAULT_PATH", "SCHEMA_VERSION", "RunSummary", "Store", "open_store"]
