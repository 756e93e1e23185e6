#!/usr/bin/env python3
"""How long does a lab take to come up and go down? A benchmark, not a test.

Labs of 10, 100 and 1000 nodes: a generated chain (`[generate] chain = N-2`:
client, r1..r(N-2), server), and a 10x10 grid for 100 nodes. Each is measured

  api  build.up(lab) / build.down(name) in this process (no interpreter start-up;
       the lab file is parsed before the clock starts)
  cli  `.venv/bin/hoplab lab up FILE` / `hoplab lab down NAME` as subprocesses
       (wall time, interpreter start-up and output included)

median of R repetitions (default 3; --quick: 1 repetition, 10 and 100 nodes).
Before each measurement the script waits for the CPUs to be idle, because the
kernel frees deleted namespaces in the background, after `ip netns del` returns.

Where Mininet is installed, the same run times
`mn --switch lxbr --controller none --topo linear,k=N --test none` for the same
N (once each by default). That builds N hosts (each a network namespace with a
shell) and N Linux bridges in the root namespace, linked by 2N-1 veth pairs: 2N
nodes, N namespaces. `mn -c` is run after a Mininet run that failed or timed out,
and once after all Mininet runs.

Run as root:  .venv/bin/python bench/lab_setup.py [--quick] [--json] [--reps R]
              [--mininet-max N] [--mininet-timeout S] [--no-mininet]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hoplab.lab import build
from hoplab.lab.state import find
from hoplab.nodes import netns
from hoplab.spec import load_lab_text

ROOT = Path(__file__).resolve().parent.parent
HOPLAB = ROOT / ".venv" / "bin" / "hoplab"
# Targets from the issue: a 100-router chain up in under 1 s, 1000 nodes in under 10 s.
TARGETS = {100: 1.0, 1000: 10.0}
MN_CMD = ["mn", "--switch", "lxbr", "--controller", "none", "--test", "none"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Case:
    label: str
    nodes: int
    generate: str  # the [generate] line

    def text(self, name: str) -> str:
        return f'name = "{name}"\n\n[generate]\n{self.generate}\n'


def cases(sizes: list[int], grid: bool) -> list[Case]:
    out = []
    for n in sizes:
        out.append(Case(f"chain {n}", n, f"chain = {n - 2}"))
        if grid and n == 100:
            out.append(Case("grid 10x10", 100, "grid = [10, 10]"))
    return out


@dataclass
class Sample:
    up: float
    down: float
    inner: float | None = None  # UpResult.seconds (api only)
    steps: dict[str, float] = field(default_factory=dict)
    links: int = 0
    tail: float = 0.0  # waited after down for the CPUs to go idle (kernel cleanup)


# --- cleanup ----------------------------------------------------------------

LIVE: set[str] = set()  # lab names this script may have left up


def remove_lab(name: str) -> None:
    """Take lab `name` down whatever state it is in; never raises."""
    try:
        if find(name) is not None:
            for w in build.down(name):
                log(f"  down {name}: {w}")
    except Exception as exc:  # cleanup must go on
        log(f"  down {name}: {exc}")
    left = netns.listed(f"hoplab-{name}-")
    if left:
        subprocess.run(["ip", "-force", "-batch", "-"],
                       input="".join(f"netns del {n}\n" for n in left),
                       capture_output=True, text=True, check=False)
    LIVE.discard(name)


def settle(max_wait: float = 20.0, idle: float = 0.85, window: float = 0.25) -> float:
    """Wait until the CPUs are mostly idle (namespace teardown is finished in the
    background by the kernel); returns the time waited."""
    t0 = time.monotonic()

    def ticks() -> tuple[int, int]:
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
        return vals[3] + vals[4], sum(vals)

    while time.monotonic() - t0 < max_wait:
        i0, a0 = ticks()
        time.sleep(window)
        i1, a1 = ticks()
        if a1 > a0 and (i1 - i0) / (a1 - a0) >= idle:
            break
    return time.monotonic() - t0


# --- hoplab -------------------------------------------------------------------

def run_api(case: Case, name: str, workdir: Path) -> Sample:
    source = str(workdir / f"{name}.toml")
    lab = load_lab_text(case.text(name), source, name)
    LIVE.add(name)
    try:
        t0 = time.perf_counter()
        res = build.up(lab)
        t_up = time.perf_counter() - t0
        links = len(res.plan.lab.links)
    except BaseException:
        remove_lab(name)
        raise
    t0 = time.perf_counter()
    warnings = build.down(name)
    t_down = time.perf_counter() - t0
    LIVE.discard(name)
    for w in warnings:
        log(f"  down {name}: {w}")
    return Sample(t_up, t_down, res.seconds, dict(res.steps), links)


def run_cli(case: Case, name: str, workdir: Path) -> Sample:
    path = workdir / f"{name}.toml"
    path.write_text(case.text(name))
    LIVE.add(name)
    try:
        t0 = time.perf_counter()
        up = subprocess.run([str(HOPLAB), "lab", "up", str(path)], capture_output=True,
                            text=True, check=False)
        t_up = time.perf_counter() - t0
        if up.returncode != 0:
            raise RuntimeError(f"hoplab lab up {path}: exit {up.returncode}: "
                               f"{up.stderr.strip()[-500:]}")
        t0 = time.perf_counter()
        down = subprocess.run([str(HOPLAB), "lab", "down", name], capture_output=True,
                              text=True, check=False)
        t_down = time.perf_counter() - t0
        if down.returncode != 0:
            raise RuntimeError(f"hoplab lab down {name}: exit {down.returncode}: "
                               f"{down.stderr.strip()[-500:]}")
    finally:
        remove_lab(name)
    return Sample(t_up, t_down)


def median_sample(samples: list[Sample]) -> Sample:
    """The sample with the median up time (so its steps belong to a real run)."""
    return sorted(samples, key=lambda s: s.up)[(len(samples) - 1) // 2]


# --- mininet ------------------------------------------------------------------

@dataclass
class MnResult:
    k: int
    status: str  # ok | timeout | failed | skipped
    up: float | None = None
    down: float | None = None
    total: float | None = None
    reported: float | None = None  # "completed in X seconds"
    detail: str = ""
    phases: list[tuple[str, float]] = field(default_factory=list)  # Mininet's "*** " lines


def mininet_missing() -> str | None:
    if shutil.which("mn") is None:
        return "mn not installed"
    if shutil.which("brctl") is None:
        return "brctl missing (apt-get install bridge-utils); --switch lxbr needs it"
    return None


def mn_clean() -> None:
    """`mn -c`. It takes minutes after a killed k=1000 run."""
    log("  mn -c")
    t0 = time.perf_counter()
    try:
        subprocess.run(["mn", "-c"], capture_output=True, text=True, check=False, timeout=1800)
    except subprocess.TimeoutExpired:
        log("  mn -c did not finish in 30 minutes; run it again by hand")
        return
    log(f"  mn -c took {time.perf_counter() - t0:.1f} s")


def _raise_nofile() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run_mininet(k: int, timeout: float) -> MnResult:
    argv = [*MN_CMD, "--topo", f"linear,k={k}"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True, preexec_fn=_raise_nofile)
    phases: list[tuple[str, float]] = []  # ("*** Adding hosts:", seconds since start)
    lines: list[str] = []
    partial = [""]  # the line being written (Mininet prints names one by one)

    def take(line: str) -> None:
        now = time.perf_counter() - t0
        if line.startswith("*** "):
            phases.append((line[4:].strip(), now))
        lines.append(line)
        del lines[:-20]

    def reader() -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        while chunk := os.read(fd, 65536):
            buf += chunk
            *done, rest = buf.split(b"\n")
            buf = rest
            for raw in done:
                take(raw.decode(errors="replace").rstrip())
            partial[0] = buf.decode(errors="replace")
        if buf:
            take(buf.decode(errors="replace").rstrip())

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        where = ""
        if phases:
            name, at = phases[-1]
            done = len(partial[0].split()) if "link" not in name.lower() \
                else partial[0].count("(")
            where = (f" in '{name}' (started at {at:.0f} s; {done} of its items "
                     f"printed)")
        return MnResult(k, "timeout", detail=f"timed out after {timeout:g} s{where}",
                        phases=phases)
    except BaseException:
        _kill_group(proc)
        raise
    total = time.perf_counter() - t0
    th.join(5)
    stop = next((at for name, at in phases if name.startswith("Stopping")), None)
    reported = None
    for line in lines:
        if line.startswith("completed in"):
            with contextlib.suppress(ValueError, IndexError):
                reported = float(line.split()[2])
    if rc != 0 or stop is None:
        return MnResult(k, "failed", total=total, phases=phases,
                        detail=f"exit {rc}: {' | '.join(lines[-3:])}")
    return MnResult(k, "ok", up=stop, down=total - stop, total=total, reported=reported,
                    phases=phases)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


# --- output -------------------------------------------------------------------

def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def verdict(nodes: int, seconds: float) -> str:
    target = TARGETS.get(nodes)
    if target is None:
        return "-"
    return "PASS" if seconds < target else "MISS"


def print_tables(res: dict[str, Any]) -> None:
    reps = res["reps"]
    print(f"hoplab lab up/down, wall clock seconds, median of {reps} "
          f"repetition{'s' if reps != 1 else ''}")
    print(f"  {res['machine']}, {res['load_at_end']:.2f} at end")
    print("  api = build.up()/build.down() in-process; cli = `hoplab lab up FILE`/"
          "`hoplab lab down` subprocess (interpreter start-up included)")
    head = (f"{'lab':<12}{'nodes':>6}{'links':>6}{'api up':>9}{'api down':>9}"
            f"{'cli up':>9}{'cli down':>9}  {'target (up)':<12}{'api':<6}{'cli':<6}")
    print(head)
    print("-" * len(head))
    for r in res["hoplab"]:
        target = TARGETS.get(r["nodes"])
        t = f"< {target:g} s" if target else "-"
        print(f"{r['lab']:<12}{r['nodes']:>6}{r['links']:>6}{fmt(r['api_up']):>9}"
              f"{fmt(r['api_down']):>9}{fmt(r['cli_up']):>9}{fmt(r['cli_down']):>9}  "
              f"{t:<12}{verdict(r['nodes'], r['api_up']):<6}"
              f"{verdict(r['nodes'], r['cli_up']):<6}")
    print("  targets (issue): a 100-router chain up in < 1 s (here 'chain 100' is 98 routers "
          "+ client + server; the grid's 100 nodes all route), 1000 nodes up in < 10 s")
    big = res.get("steps")
    if big:
        print()
        print(f"hoplab up, per step, {big['lab']} (api run with the median up time):")
        for step, secs in big["steps"].items():
            print(f"  {step:<24}{secs:>8.3f} s")
        print(f"  {'(preflight, plan, state)':<24}{big['other']:>8.3f} s")
        print(f"  {'= UpResult.seconds':<24}{big['seconds']:>8.3f} s")
        print(f"  {'parse (load_lab_text)':<24}{big['parse']:>8.3f} s  (not in api up)")
        print(f"  after build.down returned, the CPUs stayed busy ~{big['idle_wait']:.2f} s "
              "(the kernel frees namespaces in the background; not in api down)")
    mn = res.get("mininet")
    if mn is None:
        return
    print()
    cmd = " ".join([*MN_CMD, "--topo", "linear,k=N"])
    print(f"Mininet: `{cmd}`, seconds, {res['mininet_reps']} run(s) each (median)")
    if mn.get("skipped"):
        print(f"  skipped: {mn['skipped']}")
        return
    print("  linear,k=N makes N hosts (each a namespace + a shell) and N Linux bridges in "
          "the root namespace,\n  2N-1 veth pairs: 2N nodes of which N are namespaces. "
          "up = start until the first '*** Stopping',\n  down = the rest; both include "
          "Mininet's interpreter start-up, like hoplab's cli column.")
    head = (f"{'k=N':>6}{'mn nodes':>9}{'mn netns':>9}{'up':>9}{'down':>9}{'total':>9}"
            f"{'mn says':>9}   hoplab chain N, cli up+down")
    print(head)
    print("-" * len(head))
    by_n = {r["nodes"]: r for r in res["hoplab"] if r["lab"].startswith("chain")}
    for r in mn["runs"]:
        h = by_n.get(r["k"])
        hop = f"{h['cli_up'] + h['cli_down']:.3f}" if h else "-"
        if r["status"] != "ok":
            print(f"{r['k']:>6}{2 * r['k']:>9}{r['k']:>9}   {r['status']}: {r['detail']}"
                  f"   hoplab: {hop}")
            continue
        print(f"{r['k']:>6}{2 * r['k']:>9}{r['k']:>9}{fmt(r['up']):>9}{fmt(r['down']):>9}"
              f"{fmt(r['total']):>9}{fmt(r['reported']):>9}   {hop}")
    ok = [r for r in mn["runs"] if r["status"] == "ok"]
    if ok:
        r = max(ok, key=lambda x: x["k"])
        print(f"  Mininet phases, linear,k={r['k']} (seconds from start to the next phase):")
        marks = [("(interpreter start-up)", 0.0), *r["phases"], ("exit", r["total"])]
        for (name, at), (_next, until) in itertools.pairwise(marks):
            print(f"    {name:<34}{until - at:>8.3f} s")


def _interrupt(_sig: int, _frame: object) -> None:
    """SIGTERM cleans up like Ctrl-C does."""
    raise KeyboardInterrupt


# --- main ---------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1 repetition, 10 and 100 nodes")
    p.add_argument("--reps", type=int, help="repetitions (default 3, --quick 1)")
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                   help="node counts, comma-separated (default 10,100,1000)")
    p.add_argument("--no-grid", action="store_true", help="skip the 10x10 grid")
    p.add_argument("--no-mininet", action="store_true", help="skip Mininet")
    p.add_argument("--mininet-max", type=int, default=1000,
                   help="largest k for Mininet (default %(default)s)")
    p.add_argument("--mininet-reps", type=int, default=1, help="Mininet runs per size")
    p.add_argument("--mininet-timeout", type=float, default=600.0,
                   help="seconds before one Mininet run is abandoned (default %(default)g)")
    p.add_argument("--json", action="store_true", help="machine-readable results on stdout")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        log("lab_setup: needs root (network namespaces)")
        return 2
    reps = args.reps or (1 if args.quick else 3)
    sizes = args.sizes or ([10, 100] if args.quick else [10, 100, 1000])
    if min(sizes) < 2:
        p.error("a chain needs at least 2 nodes")
    signal.signal(signal.SIGTERM, _interrupt)

    res: dict[str, Any] = {
        "machine": f"{os.cpu_count()} CPUs, Linux {platform.release()}, "
                   f"load average {os.getloadavg()[0]:.2f} at start",
        "reps": reps, "hoplab": [],
    }
    tag = f"b{os.getpid()}"
    workdir = Path(tempfile.mkdtemp(prefix="hoplab-bench-"))
    mn_dirty = False  # a Mininet run happened since the last `mn -c`
    medians: dict[str, Sample] = {}
    try:
        for case in cases(sizes, not args.no_grid):
            api: list[Sample] = []
            cli: list[Sample] = []
            short = case.label.replace("chain ", "c").replace("grid 10x10", "g")
            for rep in range(reps):
                settle()
                api.append(run_api(case, f"{tag}{short}a", workdir))
                api[-1].tail = settle()
                cli.append(run_cli(case, f"{tag}{short}c", workdir))
                log(f"{case.label} rep {rep + 1}: api up {api[-1].up:.3f} down "
                    f"{api[-1].down:.3f}, cli up {cli[-1].up:.3f} down {cli[-1].down:.3f}")
            medians[case.label] = median_sample(api)
            res["hoplab"].append({
                "lab": case.label, "nodes": case.nodes, "links": api[0].links,
                "api_up": statistics.median(s.up for s in api),
                "api_down": statistics.median(s.down for s in api),
                "cli_up": statistics.median(s.up for s in cli),
                "cli_down": statistics.median(s.down for s in cli),
                "api_idle_wait_after_down": statistics.median(s.tail for s in api),
                "api_up_all": [s.up for s in api], "cli_up_all": [s.up for s in cli],
                "target_up": TARGETS.get(case.nodes),
            })
        biggest = max(cases(sizes, False), key=lambda c: c.nodes)
        t0 = time.perf_counter()
        load_lab_text(biggest.text("parse"), "parse.toml")
        parse = time.perf_counter() - t0
        med = medians[biggest.label]
        row = next(r for r in res["hoplab"] if r["lab"] == biggest.label)
        res["steps"] = {"lab": biggest.label, "nodes": biggest.nodes, "parse": parse,
                        "idle_wait": row["api_idle_wait_after_down"],
                        "seconds": med.inner, "steps": med.steps,
                        "other": (med.inner or 0.0) - sum(med.steps.values())}

        if not args.no_mininet:
            missing = mininet_missing()
            res["mininet_reps"] = args.mininet_reps
            if missing:
                res["mininet"] = {"skipped": missing}
            else:
                runs = []
                for k in sizes:
                    if k > args.mininet_max:
                        runs.append(MnResult(k, "skipped", detail=f"--mininet-max "
                                                                  f"{args.mininet_max}"))
                        continue
                    got: list[MnResult] = []
                    for _ in range(args.mininet_reps):
                        settle()
                        log(f"mininet linear,k={k} (timeout {args.mininet_timeout:g} s)")
                        mn_dirty = True
                        r = run_mininet(k, args.mininet_timeout)
                        log(f"  {r.status} total {fmt(r.total)} {r.detail}")
                        got.append(r)
                        if r.status != "ok":
                            mn_clean()
                            mn_dirty = False
                            break
                    ok = [g for g in got if g.status == "ok"]
                    if ok and len(ok) == len(got):
                        runs.append(sorted(ok, key=lambda g: g.total or 0.0)[(len(ok) - 1) // 2])
                    else:
                        runs.append(next(g for g in got if g.status != "ok"))
                res["mininet"] = {"runs": [r.__dict__ for r in runs]}
    except KeyboardInterrupt:
        log("interrupted; taking down what is up")
        return 130
    finally:
        for name in sorted(LIVE):
            remove_lab(name)
        for kind in "cg":
            for name in netns.listed(f"hoplab-{tag}{kind}"):
                subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        if mn_dirty:
            mn_clean()
        shutil.rmtree(workdir, ignore_errors=True)
    res["load_at_end"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print_tables(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
