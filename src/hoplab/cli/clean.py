"""`hoplab clean`: remove every lab, namespace and process hoplab left behind."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("clean", help="remove everything hoplab created (also after a crash)")
    p.set_defaults(func=run, needs_root=True)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hoplab.lab.clean import clean

    console = Console()
    done = clean()
    for line in done:
        console.print(line)
    if not done:
        console.print("nothing to clean")
    return 0
