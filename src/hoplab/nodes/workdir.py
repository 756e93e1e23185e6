"""A run's working directory (tool outputs, nginx's pages, perf data), named after the
process that made it, so `hoplab clean` can tell one a SIGKILL left behind from one a
running experiment is writing: /tmp/hoplab-run-PID-START-XXXX, START being the
process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from hoplab.nodes.procs import proc_start_time

PREFIX = "hoplab-run-"
_NAME = re.compile(rf"^{PREFIX}(\d+)-(\d+)-")


def make() -> Path:
    pid = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-{proc_start_time(pid) or 0}-"))


def owner_exited(name: str) -> bool:
    """Whether the directory `name` (a run's, or one named after it on a device) belongs
    to a hoplab process of this machine that has exited. Not a run's name: False."""
    m = _NAME.match(name)
    return m is not None and proc_start_time(int(m.group(1))) != int(m.group(2))


def orphans(root: Path | None = None) -> list[Path]:
    """Working directories whose process has exited."""
    base = Path(root or tempfile.gettempdir())
    found = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    for d in entries:
        if owner_exited(d.name) and d.is_dir():
            found.append(d)
    return found


def remove_orphans(root: Path | None = None) -> list[str]:
    done = []
    for d in orphans(root):
        shutil.rmtree(d, ignore_errors=True)
        done.append(f"removed run directory {d} (its hoplab process has exited)")
    return done
