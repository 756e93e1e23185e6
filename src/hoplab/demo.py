"""`make demo`: a short real experiment on the example chain, stored in ./hoplab.db.

It runs examples/demo.toml with `hoplab run` (about a minute and a half: the
chain of four namespaces with a 50 or 100 Mbit/s bottleneck, two TCP flows and
latency under load, four times each in a random order), then reads the runs
back with `hoplab runs`, shows one with `hoplab show` and compares the two
bottlenecks with `hoplab compare`, as a user would.
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
    this = runs[-1].experiment_id
    mine = [r for r in runs if r.experiment_id == this]
    print()
    hoplab(["runs", "--db", DB, "--filter", f"experiment_id={this}"])
    rrul = [r for r in mine if r.kind == "rrul"]
    print()
    hoplab(["show", str((rrul or mine)[-1].id), "--db", DB])
    print()
    hoplab(["compare", f"experiment_id={this},bottleneck=50mbit",
            f"experiment_id={this},bottleneck=100mbit", "--db", DB])
    first, last = mine[0].id, mine[-1].id
    print(f"\nnext: hoplab report {first}-{last} -o demo.html   (open it in a browser)\n"
          f"      hoplab serve                      (http://127.0.0.1:8080)\n"
          f"      hoplab plot {rrul[-1].id if rrul else first} --kind timeseries")
    return code


if __name__ == "__main__":
    sys.exit(main())
