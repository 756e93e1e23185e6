"""Finding perf, hoplab-fold and inferno's binaries, and saying plainly when one is missing.

hoplab-fold (fold/, the folder) and inferno (the Rust port of FlameGraph, which draws
the flame graphs) are built by `make setup` into the virtualenv's bin directory, next
to the hoplab command; a system-wide install on PATH works too.
"""

from __future__ import annotations

from hoplab.errors import CapabilityError
from hoplab.nodes.tools import find as find

INFERNO_VERSION = "0.12.3"


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
