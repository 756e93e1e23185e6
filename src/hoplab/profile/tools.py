"""Finding perf, hoplab-fold and inferno's binaries, and saying plainly when one is missing.

hoplab-fold (fold/, the folder) and inferno (the Rust port of FlameGraph, which draws
the flame graphs) are built by `make setup` into the virtualenv's bin directory, next
to the hoplab command; a system-wide install on PATH works too.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from hoplab.errors import CapabilityError

INFERNO_VERSION = "0.12.3"


def find(tool: str) -> str | None:
    if tool == "perf" and "HOPLAB_PERF" in os.environ:
        # A perf matching the kernel may live outside PATH (linux-perf-VERSION).
        chosen = os.environ["HOPLAB_PERF"]
        return chosen if os.access(chosen, os.X_OK) else None
    beside = Path(sys.executable).with_name(tool)
    if beside.exists():
        return str(beside)
    return shutil.which(tool)


def need(tool: str) -> str:
    path = find(tool)
    if path is not None:
        return path
    if tool == "perf":
        raise CapabilityError("perf is not installed: apt-get install linux-perf (or make setup)")
    if tool == "hoplab-fold":
        raise CapabilityError("hoplab-fold is not installed: run make fold (or make setup), "
                              "which builds fold/ with cargo")
    raise CapabilityError(f"{tool} is not installed: it comes with inferno {INFERNO_VERSION}; "
                          f"run make setup, or cargo install --locked inferno "
                          f"--version {INFERNO_VERSION}")
