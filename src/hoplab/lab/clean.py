"""Remove everything hoplab created, including what a crash left behind.

Only things hoplab owns are touched: labs listed under /run/hoplab/labs,
namespaces whose names carry the reserved `hoplab-` prefix, processes living
inside those namespaces, and their /etc/netns entries.
"""

from __future__ import annotations

import shutil

from hoplab.lab import netns
from hoplab.lab.state import ETC_NETNS, LABS_DIR, all_states
from hoplab.lab.teardown import delete_namespaces, kill_leftovers, teardown


def clean() -> list[str]:
    """Returns a line per thing removed; empty when there was nothing to do."""
    done: list[str] = []
    for state in all_states():
        for warning in teardown(state):
            done.append(f"{state.name}: {warning}")
        done.append(f"lab {state.name}: removed ({len(state.namespaces)} namespaces)")
    orphans = netns.listed("hoplab-")
    done += kill_leftovers(orphans)
    done += delete_namespaces(orphans)
    if orphans:
        done.append(f"removed {len(orphans)} leftover namespaces")
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.iterdir():
            if d.name.startswith("hoplab-"):
                shutil.rmtree(d, ignore_errors=True)
    if LABS_DIR.is_dir():
        # Every readable record was torn down above; what is left is debris:
        # run directories, half-written or unreadable records.
        for d in LABS_DIR.iterdir():
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
            else:
                d.unlink(missing_ok=True)
                if d.suffix == ".json":
                    done.append(f"removed unreadable lab record {d.name}")
    return done
