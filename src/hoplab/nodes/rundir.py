"""Where hoplab keeps what it must find again after a crash, on this machine: a
record per lab (`LABS_DIR/LAB.json`, written by hoplab.lab.state) and a directory per
lab beside it (`LABS_DIR/LAB/`: its hosts file, its wires' counters, the log of the
processes its tests start, hoplab.nodes.tracking). HOPLAB_RUN_DIR moves it all (the
tests do). Imports only `os`: `hoplab lab exec` reads a record through it."""

from __future__ import annotations

import os

DEFAULT_RUN_DIR = "/run/hoplab"
RUN_DIR = os.environ.get("HOPLAB_RUN_DIR") or DEFAULT_RUN_DIR
LABS_DIR = os.path.join(RUN_DIR, "labs")


def record_path(lab: str) -> str:
    return os.path.join(LABS_DIR, f"{lab}.json")


def lab_dir(lab: str) -> str:
    return os.path.join(LABS_DIR, lab)
