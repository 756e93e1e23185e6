"""The `hoplab` command: parse arguments, dispatch, turn errors into exit codes."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Collection, Sequence

from hoplab import __version__
from hoplab.errors import HoplabError

# Every command, the module under hoplab.cli that registers it, and its one-line help,
# in the order `hoplab --help` lists them. Only the module of the command being run is
# imported: importing them all (and the store, numpy and the renderers behind them)
# would make every command, even `--version`, pay for all of them at start-up.
# A module that registers several commands has them next to each other, in its order.
COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("doctor", "show what this machine can build"),
    "check": ("check", "validate lab and experiment files (builds nothing)"),
    "lab": ("lab", "build, inspect and remove labs"),
    "run": ("run", "run an experiment and store its runs"),
    "submit": ("submit", "queue an experiment's runs for the fleet's benches"),
    "worker": ("worker", "take runs of submitted experiments from the fleet's queue (a bench)"),
    "fleet": ("fleet", "the fleet: benches, jobs, experiments, failures"),
    "schedule": ("schedule", "run an experiment on the fleet on a cron schedule, with alerts"),
    "runs": ("runs", "list stored runs"),
    "show": ("runs", "show one stored run"),
    "compare": ("compare", "compare two sets of runs, with a verdict per metric"),
    "report": ("report", "write stored runs as one self-contained HTML file"),
    "serve": ("serve", "a read-only web dashboard over the store"),
    "flamegraph": ("profile", "draw a run's flame graph (or a diff of two)"),
    "profile": ("profile", "a run's top symbols and time by category (or a diff of two sides)"),
    "fold": ("profile", "perf script output -> folded stacks on stdout"),
    "clean": ("clean", "remove everything hoplab created (also after a crash)"),
    "plot": ("plot", "draw stored runs (PNG, SVG, PDF)"),
    "trend": ("trend", "a metric across versions, with every change point"),
    "annotate": ("annotate", "note what happened (a firmware change, a cable swapped)"),
    "baseline": ("baseline", "pin the runs a series' latest runs are judged against"),
    "import": ("import_", "load iperf3 JSON outputs and Flent data files as runs"),
    "export": ("export", "write one run as JSON or CSV"),
    "migrate": ("migrate", "upgrade a store of an older schema (keeping a copy of a SQLite file)"),
    "bisect": ("bisect", "find the commit that changed a figure (git bisect that knows noise)"),
}


def _register(module: str, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None] = \
        importlib.import_module(f"hoplab.cli.{module}").register
    register(sub)


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of `commands` (default: of every command).

    The other commands are listed by name and help only, so that `hoplab --help`
    still shows them all without importing their modules.
    """
    parser = argparse.ArgumentParser(
        prog="hoplab", description="A performance lab for routers, meshes and network paths.")
    parser.add_argument("--version", action="version", version=f"hoplab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = {module for name, (module, _) in COMMANDS.items()
              if commands is None or name in commands}
    registered: set[str] = set()
    for name, (module, help_) in COMMANDS.items():
        if module not in wanted:
            sub.add_parser(name, help=help_, add_help=False)
        elif module not in registered:
            _register(module, sub)
            registered.add(module)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    # The first word that is not an option: hoplab's own options take no value.
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    parser = build_parser([command] if command else [])
    args = parser.parse_args(argv)
    if getattr(args, "needs_root", False) and os.geteuid() != 0:
        print("hoplab: error: this command needs root (network namespaces)", file=sys.stderr)
        return 2
    from hoplab.lab.signals import until_exit

    try:
        # A stop under way (run, lab up, bisect) is shielded from further signals to the
        # exit: saying so and exiting 130 are part of it.
        with until_exit():
            code: int = args.func(args)
            # Written out here, so that a closed pipe is met inside this handler and not
            # by Python's flush at exit (which prints a traceback and exits 120).
            sys.stdout.flush()
    except HoplabError as exc:
        print(f"hoplab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hoplab: interrupted; what was being built has been removed", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `hoplab ... | head` closed the pipe: not an error; keep Python from printing one
        # while it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
