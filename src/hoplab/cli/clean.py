"""`hoplab clean [NAME...]`: remove the labs, namespaces and processes hoplab left behind;
a lab another hoplab process still uses is left unless --force."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("clean", help="remove everything hoplab created (also after a crash)",
                       description="Remove labs, namespaces and processes hoplab left "
                                   "behind. A lab whose owner (the hoplab process that "
                                   "built it) still runs is left alone unless --force; "
                                   "so are the namespaces of a hoplab under another "
                                   "HOPLAB_RUN_DIR, always.")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="only these labs (default: all)")
    p.add_argument("--force", action="store_true",
                   help="also remove labs another hoplab process is still using, and "
                        "hoplab- namespaces whose owner cannot be told")
    p.set_defaults(func=run, needs_root=True)


def run(args: argparse.Namespace) -> int:
    from hoplab.lab.clean import clean
    from hoplab.spec.names import given, lab_name

    for name in args.names:
        given(lab_name, name, "clean NAME")
    result = clean(force=args.force, names=args.names)
    # Plain lines, never wrapped: scripts and tests look for lab names in them.
    for line in result.done + result.left:
        print(line)
    if not result.done and not result.left:
        print("nothing to clean")
    return 0
