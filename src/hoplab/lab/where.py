"""Where a lab lives on this machine: its state record and its nodes' namespaces.

`hoplab lab exec`, typed many times a session, reads a node's namespace here and
execs `ip netns exec`; this module imports only `os` and `json` so that the
command costs little more than the `ip netns exec` it becomes (the full record,
hoplab.lab.state, takes another 15 to 20 ms to import: dataclasses, pathlib).
hoplab.lab.state and hoplab.lab.netns take their directories from here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from hoplab.errors import LabError

RUN_DIR = os.environ.get("HOPLAB_RUN_DIR", "/run/hoplab")
LABS_DIR = os.path.join(RUN_DIR, "labs")
NETNS_DIR = "/run/netns"


def record_path(lab: str) -> str:
    return os.path.join(LABS_DIR, f"{lab}.json")


def node_namespaces(lab: str) -> dict[str, str] | None:
    """Each node of lab `lab` and its namespace, from the lab's record; None when no
    lab of that name is up. A damaged record is hoplab.lab.state's LabError."""
    try:
        with open(record_path(lab), encoding="utf-8") as f:
            nodes = json.load(f).get("summary", {}).get("nodes", {})
        return {name: str(info["netns"]) for name, info in nodes.items()}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        # The full reader says what is wrong with the record, in its words.
        from hoplab.lab.state import find

        find(lab)
        raise LabError(f"{record_path(lab)}: no node table ({type(exc).__name__}: {exc}); "
                       "hoplab clean removes the lab") from None


def node_entry(lab: str, node: str) -> dict[str, object]:
    """A node's entry in the record of lab `lab` (a device's: how to reach it over SSH,
    as recorded at lab up); the record was read a moment ago by node_namespaces."""
    with open(record_path(lab), encoding="utf-8") as f:
        entry: dict[str, object] = json.load(f)["summary"]["nodes"][node]
    return entry


def netns_exists(namespace: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, namespace))


def exec_argv(namespace: str, argv: Sequence[str]) -> list[str]:
    """argv that runs inside a node as a user would: `ip netns exec` also mounts
    the lab's hosts file over /etc/hosts, so node names resolve."""
    return ["ip", "netns", "exec", namespace, *argv]
