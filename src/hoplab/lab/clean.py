"""Remove everything hoplab created, including what a crash left behind.

Only things hoplab owns are touched: labs listed under /run/hoplab/labs,
namespaces whose names carry the reserved `hoplab-` prefix, processes living
inside those namespaces, and their /etc/netns entries.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

from hoplab.lab import netns
from hoplab.lab.state import ETC_NETNS, LABS_DIR, all_states
from hoplab.lab.teardown import processes_in, teardown


def clean() -> list[str]:
    """Returns a line per thing removed; empty when there was nothing to do."""
    done: list[str] = []
    for state in all_states():
        for warning in teardown(state):
            done.append(f"{state.name}: {warning}")
        done.append(f"lab {state.name}: removed ({len(state.namespaces)} namespaces)")
    orphans = netns.listed("hoplab-")
    for ns, pids in processes_in(orphans).items():
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                done.append(f"killed pid {pid} inside {ns}")
            except ProcessLookupError:
                pass
    if orphans:
        subprocess.run(["ip", "-force", "-batch", "-"],
                       input="".join(f"netns del {n}\n" for n in orphans),
                       capture_output=True, text=True, check=False)
        done.append(f"removed {len(orphans)} leftover namespaces")
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.iterdir():
            if d.name.startswith("hoplab-"):
                shutil.rmtree(d, ignore_errors=True)
    if LABS_DIR.is_dir():
        for d in LABS_DIR.iterdir():
            if d.is_dir() or d.suffix == ".tmp":
                shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink()
    return done
