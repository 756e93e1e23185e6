#!/usr/bin/env python3
"""How fast does the command line start? A benchmark, not a test.

Three figures, each next to its anchor, measured in one run through the real
entry point (.venv/bin/hoplab) as a user types it:

  hoplab --version                   against  python -c pass (the bare interpreter)
  hoplab lab exec LAB client -- true against  ip netns exec NS true (same namespace)
  hoplab lab up CHAIN100.toml        against  build.up(lab) in this process

Targets (issue 10): --version within 6x the interpreter; lab exec within 60 ms
of ip netns exec; a 100-router chain up through the CLI at most 0.25 s more than
in-process. Start-up figures are medians of --reps runs (default 21), the lab up
figures medians of --lab-reps (default 5). The commands take turns, so a change
in the machine's load hits anchor and hoplab alike.

The children run without PYTHONDONTWRITEBYTECODE, as in a user's shell, after one
untimed warm-up run that leaves hoplab's bytecode cached (pip does the same when
it installs); --env-as-is keeps the caller's environment instead.

Run as root:  .venv/bin/python bench/cli_startup.py [--reps N] [--lab-reps N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hoplab.lab import build
from hoplab.lab.state import find
from hoplab.spec import load_lab_text
from lab_setup import remove_lab, settle

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
HOPLAB = ROOT / ".venv" / "bin" / "hoplab"
VERSION_RATIO = 6.0  # --version within 6x of `python -c pass`
EXEC_EXTRA_S = 0.060  # lab exec within 60 ms of `ip netns exec`
UP_EXTRA_S = 0.25  # lab up through the CLI at most 0.25 s more than in-process


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def chain(name: str, routers: int) -> str:
    # client, r1..rN, server: the lab bench/lab_setup.py calls "chain N+2".
    return f'name = "{name}"\n\n[generate]\nchain = {routers}\n'


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=False)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr[-300:]}")
    return took


def medians(commands: dict[str, list[str]], reps: int, env: dict[str, str]) -> dict[str, float]:
    """Median wall time of each command; one round runs every command once."""
    for argv in commands.values():
        timed(argv, env)  # warm-up: page cache, bytecode
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(reps):
        for key, argv in commands.items():
            times[key].append(timed(argv, env))
    return {k: statistics.median(v) for k, v in times.items()}


def lab_up(workdir: Path, reps: int, env: dict[str, str]) -> tuple[float, float]:
    """Medians of build.up() in-process and of `hoplab lab up` for a 100-router chain."""
    api: list[float] = []
    cli: list[float] = []
    for rep in range(reps):
        for how, out in (("api", api), ("cli", cli)):
            name = f"cs{os.getpid() % 100000}{how[0]}{rep}"
            path = workdir / f"{name}.toml"
            path.write_text(chain(name, 100))
            settle()  # the kernel frees the namespaces of the last lab in the background
            try:
                if how == "api":
                    lab = load_lab_text(path.read_text(), str(path))
                    t0 = time.perf_counter()
                    build.up(lab)
                    out.append(time.perf_counter() - t0)
                else:
                    out.append(timed([str(HOPLAB), "lab", "up", str(path)], env))
            finally:
                remove_lab(name)
            log(f"  lab up, {how} {rep + 1}/{reps}: {out[-1]:.3f} s")
    return statistics.median(api), statistics.median(cli)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def measure(args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    if not args.env_as_is:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    rows: list[dict[str, Any]] = []

    log(f"--version against python -c pass, {args.reps} runs each")
    m = medians({"anchor": [str(PYTHON), "-c", "pass"],
                 "hoplab": [str(HOPLAB), "--version"]}, args.reps, env)
    ratio = m["hoplab"] / m["anchor"]
    rows.append({"what": "hoplab --version", "anchor_what": "python -c pass",
                 "anchor_s": m["anchor"], "hoplab_s": m["hoplab"],
                 "target": f"<= {VERSION_RATIO:g}x anchor", "got": f"{ratio:.1f}x",
                 "pass": ratio <= VERSION_RATIO})

    name = f"cs{os.getpid() % 100000}x"
    with tempfile.TemporaryDirectory(prefix="hoplab-cli-bench-") as tmp:
        path = Path(tmp) / f"{name}.toml"
        path.write_text(chain(name, 1))
        try:
            build.up(load_lab_text(path.read_text(), str(path)))
            state = find(name)
            assert state is not None
            ns = state.summary["nodes"]["client"]["netns"]
            log(f"lab exec against ip netns exec, {args.reps} runs each")
            m = medians({"anchor": ["ip", "netns", "exec", ns, "true"],
                         "hoplab": [str(HOPLAB), "lab", "exec", name, "client", "--", "true"]},
                        args.reps, env)
        finally:
            remove_lab(name)
        extra = m["hoplab"] - m["anchor"]
        rows.append({"what": "hoplab lab exec LAB client -- true",
                     "anchor_what": "ip netns exec NS true",
                     "anchor_s": m["anchor"], "hoplab_s": m["hoplab"],
                     "target": f"<= anchor + {EXEC_EXTRA_S * 1000:g} ms",
                     "got": f"+{extra * 1000:.0f} ms", "pass": extra <= EXEC_EXTRA_S})

        if args.lab_reps > 0:
            log(f"lab up of a 100-router chain, in-process and through the CLI, "
                f"{args.lab_reps} runs each")
            api, cli = lab_up(Path(tmp), args.lab_reps, env)
            extra = cli - api
            rows.append({"what": "hoplab lab up (chain, 100 routers)",
                         "anchor_what": "build.up() in-process",
                         "anchor_s": api, "hoplab_s": cli,
                         "target": f"<= anchor + {UP_EXTRA_S:g} s",
                         "got": f"+{extra:.3f} s", "pass": extra <= UP_EXTRA_S})
    return {
        "cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
        "load_average": os.getloadavg()[0], "reps": args.reps, "lab_reps": args.lab_reps,
        "bytecode_cache": "PYTHONDONTWRITEBYTECODE" not in env, "rows": rows,
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.3f} s"


def print_table(res: dict[str, Any]) -> None:
    print(f"hoplab command-line start-up, wall clock, medians ({res['cpus']} CPUs, Linux "
          f"{res['kernel']}, Python {res['python']}, load average {res['load_average']:.2f})")
    cache = ("on (PYTHONDONTWRITEBYTECODE unset, as in a user's shell)" if res["bytecode_cache"]
             else "off (PYTHONDONTWRITEBYTECODE set in the caller's environment)")
    print(f"  {res['reps']} runs per start-up figure, {res['lab_reps']} per lab up figure; "
          f"bytecode cache {cache}")
    head = (f"{'command':<36}{'anchor':<24}{'anchor':>10}{'hoplab':>11}  "
            f"{'target':<22}{'got':>10}  result")
    print(head)
    print("-" * len(head))
    for r in res["rows"]:
        print(f"{r['what']:<36}{r['anchor_what']:<24}{ms(r['anchor_s']):>10}"
              f"{ms(r['hoplab_s']):>11}  {r['target']:<22}{r['got']:>10}  {verdict(r['pass'])}")


def _interrupt(_sig: int, _frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM takes the labs down as Ctrl-C does


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--reps", type=int, default=21, help="runs per start-up figure")
    p.add_argument("--lab-reps", type=int, default=5,
                   help="runs per lab up figure (0: leave lab up out)")
    p.add_argument("--env-as-is", action="store_true",
                   help="keep PYTHONDONTWRITEBYTECODE and the rest of the caller's environment")
    p.add_argument("--json", action="store_true", help="results as JSON on stdout")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        log("bench/cli_startup.py needs root: it builds labs")
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    res = measure(args)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
