"""Where a lab lives on this machine: its state record and its nodes' namespaces.

`hoplab lab exec`, typed many times a session, reads a node's namespace here and
execs `ip netns exec`; this module imports only `os` and `json` so that the
command costs little more than the `ip netns exec` it becomes (the full record,
hoplab.lab.state, takes another 15 to 20 ms to import: dataclasses, pathlib).
The directories are hoplab.nodes.rundir's and hoplab.nodes.netns's (which import
only `os` too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hoplab.errors import LabError
from hoplab.nodes import netns
from hoplab.nodes.rundir import record_path


def node_namespaces(lab: str) -> dict[str, str | None] | None:
    """Each node of lab `lab` and its namespace on this machine (None for a node that
    has none: a device), from the lab's record; None when no lab of that name is up. A
    damaged record is hoplab.lab.state's LabError."""
    try:
        with open(record_path(lab), encoding="utf-8") as f:
            nodes = json.load(f).get("summary", {}).get("nodes", {})
        return {name: None if info["netns"] is None else str(info["netns"])
                for name, info in nodes.items()}
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
    return netns.exists(namespace)


def exec_argv(namespace: str, argv: Sequence[str]) -> list[str]:
    """argv that runs inside a node as a user would (hoplab.nodes.netns.exec_argv)."""
    return netns.exec_argv(namespace, argv)
