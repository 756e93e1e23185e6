"""Which search the throughput kind uses, by measurement: one phase of full-length trials
(`search = "binary"`: bisection guided by the forwarding rate of failed trials) against
MLRsearch's phases (`search = "mlr"`: 1 s trials first, then longer ones from their
bounds, the last at full length), for the same precision, through `hoplab run` as a user
types it.

    .venv/bin/python bench/ndr_search.py                       # 10 s trials, 1518 bytes
    .venv/bin/python bench/ndr_search.py --trial 20s --sizes 64,1518 --reps 2

The lab is client - r - server with r -> server shaped to 50 Mbit/s and a queue of 200
frames. For each search it prints the wall time of the whole run, the number of trials
and the seconds spent in them (trial + drain), the answer per size and its distance from
the computed one (docs/experiment-format.md: R / ((S - 4) x 8) + (bucket / (S - 4) + Q) / T).
The two alternate, so a change in the machine's load hits both. Needs root.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from hoplab.lab.shaping import burst_bytes
from hoplab.spec.units import parse_time
from hoplab.store import open_store

HOPLAB = str(Path(sys.executable).with_name("hoplab"))
RATE_BPS, QUEUE = 50_000_000, 200
LAB = f"""name = "ndrbench"
[addressing]
ipv6 = false
[nodes.client]
[nodes.r]
[nodes.server]
[[links]]
between = ["client", "r"]
[[links]]
between = ["r", "server"]
rate = "{RATE_BPS}bit"
queue = {QUEUE}
"""


def experiment(search: str, trial: str, sizes: list[int], precision: str, drain: str) -> str:
    return (f'lab = "lab.toml"\n[[tests]]\nname = "ndr"\nkind = "throughput"\n'
            f'from = "client"\nto = "server"\nframe_sizes = {sizes}\ntrial = "{trial}"\n'
            f'drain = "{drain}"\nprecision = "{precision}"\nsearch = "{search}"\n'
            f'latency = false\n')


def expected(size: int, trial_s: float) -> float:
    frame = size - 4
    return RATE_BPS / (frame * 8) + (burst_bytes(RATE_BPS) / frame + QUEUE) / trial_s


def one(work: Path, search: str, args: argparse.Namespace, sizes: list[int]) -> dict[str, object]:
    (work / "exp.toml").write_text(experiment(search, args.trial, sizes, args.precision,
                                              args.drain))
    db = work / f"{search}.db"
    t0 = time.perf_counter()
    proc = subprocess.run([HOPLAB, "run", str(work / "exp.toml"), "--db", str(db), "--json",
                           "--lab-name", "ndrbench"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{search}: hoplab run failed: {proc.stderr[-2000:]}")
    (run,) = json.loads(proc.stdout)["runs"]
    with open_store(str(db)) as store:
        rec = store.get_run(run["id"])
    db.unlink()
    answers = {m.key: m.value for m in rec.metrics if m.name == "ndr_fps" and m.flow is None}
    trials = [s for s in rec.series if s.name == "throughput_trial"]
    return {"wall_s": wall, "trials": sum(len(s.v) for s in trials), "answers": answers}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trial", default="10s")
    p.add_argument("--sizes", default="1518")
    p.add_argument("--precision", default="0.5%")
    p.add_argument("--drain", default="2s")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    trial_s = parse_time(args.trial)
    results: dict[str, list[dict[str, object]]] = {"binary": [], "mlr": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "lab.toml").write_text(LAB)
        for rep in range(args.reps):
            order = ("binary", "mlr") if rep % 2 == 0 else ("mlr", "binary")
            for search in order:
                results[search].append(one(work, search, args, sizes))
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"{args.trial} trials, precision {args.precision}, drain {args.drain}, "
          f"{args.reps} run(s) each, alternating")
    for search, runs in results.items():
        wall = statistics.median(float(r["wall_s"]) for r in runs)  # type: ignore[arg-type]
        trials = statistics.median(int(r["trials"]) for r in runs)  # type: ignore[call-overload]
        print(f"{search:>7}: {wall:6.1f} s a run (median), {trials:g} trials")
        for size in sizes:
            got = [float(r["answers"][str(size)]) for r in runs]  # type: ignore[index]
            want = expected(size, trial_s)
            print(f"         {size} B: NDR {statistics.median(got):9.1f} frames/s, "
                  f"computed {want:9.1f} ({statistics.median(got) / want - 1:+.2%})")


if __name__ == "__main__":
    main()
