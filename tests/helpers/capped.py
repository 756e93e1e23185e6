"""Run a command in the CPU time other work leaves, without starving it: `make test` runs
the unit tests so, beside the lab tests' pool (docs/testing.md).

    python -m tests.helpers.capped --cpu 50 --weight 33 -- pytest -q tests/unit

The command goes into a cgroup of its own with a CFS bandwidth cap (`--cpu`, percent of
one core per 100 ms period) and a weight (`--weight`, percent of a plain process's). A
lab test beside it then meets at most half a core of it, less than the busy core every
lab test is written to pass beside; and it is never starved as a SCHED_IDLE or nice 19
process is (some unit tests bound a wait by the wall clock: a pool run had 12 s with
both cores busy). cgroup v2 where the unified hierarchy has the CPU controller, else
v1's (hoplab's VM cap finds it: hoplab.lab.vm.cgroup.hierarchy).

Without root or a CPU controller the command runs at nice 5, and says so. Its exit
status is the command's; SIGINT and SIGTERM are passed on to it. Cgroups that a killed
run left (empty) are removed by the next run."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from hoplab.lab.vm.cgroup import PERIOD_US, Hierarchy, hierarchy, remove

PREFIX = "hoplab-test-capped."


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def make(h: Hierarchy, cpu_pct: float, weight_pct: float) -> Path:
    """A new cgroup at the top of the hierarchy with the cap and the weight; the empty
    ones earlier runs left are removed first."""
    for old in h.root.glob(PREFIX + "*"):
        remove(old)
    cg = h.root / f"{PREFIX}{os.getpid()}"
    quota = max(1000, round(PERIOD_US * cpu_pct / 100))
    if h.version == 2:
        _write(h.root / "cgroup.subtree_control", "+cpu")
        cg.mkdir()
        _write(cg / "cpu.max", f"{quota} {PERIOD_US}")
        _write(cg / "cpu.weight", str(max(1, round(weight_pct))))
    else:
        cg.mkdir()
        _write(cg / "cpu.cfs_period_us", str(PERIOD_US))
        _write(cg / "cpu.cfs_quota_us", str(quota))
        _write(cg / "cpu.shares", str(max(2, round(1024 * weight_pct / 100))))
    return cg


def run(argv: list[str], cpu_pct: float, weight_pct: float) -> int:
    h = hierarchy() if os.geteuid() == 0 else None
    cg = None
    if h is not None:
        try:
            cg = make(h, cpu_pct, weight_pct)
        except OSError as exc:
            print(f"capped: no cgroup ({exc}): running at nice 5", file=sys.stderr)
    elif os.geteuid() == 0:
        print("capped: no CPU controller mounted: running at nice 5", file=sys.stderr)

    def enter() -> None:
        if cg is None:
            os.nice(5)
        else:
            _write(cg / "cgroup.procs", str(os.getpid()))

    proc = subprocess.Popen(argv, preexec_fn=enter)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: proc.send_signal(s))
    try:
        code = proc.wait()
        return 128 - code if code < 0 else code     # as a shell says a signal
    finally:
        if cg is not None:
            warning = remove(cg)
            if warning:
                print(f"capped: {warning}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.helpers.capped",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", type=float, default=50.0, help="percent of one core")
    ap.add_argument("--weight", type=float, default=33.0,
                    help="percent of a plain process's weight")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        ap.error("no command")
    return run(argv, args.cpu, args.weight)


if __name__ == "__main__":
    sys.exit(main())
