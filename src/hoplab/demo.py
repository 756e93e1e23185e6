"""`make demo`: a short real experiment on the example chain, stored in ./hoplab.db.

It runs examples/demo.toml with `hoplab run` (about a minute: a chain of four
namespaces, four TCP flows, a ping stream and latency under load, twice each in
a random order), then reads the runs back with `hoplab runs` and shows one
with `hoplab show`, as a user would.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hoplab.cli.main import main as hoplab
from hoplab.store import open_store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo.toml"
DB = "hoplab.db"


def main() -> int:
    code = hoplab(["run", str(EXAMPLE), "--db", DB])
    if code not in (0, 1):
        return code
    with open_store(DB) as store:
        runs = store.list_runs({"experiment": "demo"})
    if not runs:
        print("hoplab demo: no runs were stored", file=sys.stderr)
        return 1
    last = runs[-len([r for r in runs if r.experiment_id == runs[-1].experiment_id]):]
    print()
    hoplab(["runs", "--db", DB, "--filter", f"experiment_id={runs[-1].experiment_id}"])
    rrul = [r for r in last if r.kind == "rrul"]
    print()
    hoplab(["show", str((rrul or last)[-1].id), "--db", DB])
    return code


if __name__ == "__main__":
    sys.exit(main())
