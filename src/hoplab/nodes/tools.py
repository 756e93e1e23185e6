"""Finding a tool on this machine: what `which()` answers for a node that is a
namespace here, and where profiling finds perf, hoplab-fold and inferno."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def find(tool: str) -> str | None:
    """HOPLAB_PERF for perf, then the virtualenv's bin (where `make setup` builds
    hoplab-fold and inferno), then PATH."""
    if tool == "perf" and "HOPLAB_PERF" in os.environ:
        # A perf matching the kernel may live outside PATH (linux-perf-VERSION).
        chosen = os.environ["HOPLAB_PERF"]
        return chosen if os.access(chosen, os.X_OK) else None
    beside = Path(sys.executable).with_name(tool)
    if beside.exists():
        return str(beside)
    return shutil.which(tool)
