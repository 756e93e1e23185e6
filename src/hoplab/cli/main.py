"""The `hoplab` command: parse arguments, dispatch, turn errors into exit codes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from hoplab import __version__
from hoplab.cli import (
    clean,
    compare,
    doctor,
    export,
    import_,
    lab,
    plot,
    profile,
    report,
    run,
    runs,
    serve,
)
from hoplab.errors import HoplabError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hoplab", description="A performance lab for routers, meshes and network paths.")
    parser.add_argument("--version", action="version", version=f"hoplab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    doctor.register(sub)
    lab.register(sub)
    run.register(sub)
    runs.register(sub)
    compare.register(sub)
    report.register(sub)
    serve.register(sub)
    profile.register(sub)
    clean.register(sub)
    plot.register(sub)
    import_.register(sub)
    export.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "needs_root", False) and os.geteuid() != 0:
        print("hoplab: error: this command needs root (network namespaces)", file=sys.stderr)
        return 2
    try:
        code: int = args.func(args)
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
