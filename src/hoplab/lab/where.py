"""Where a lab lives on this machine: its state record, its nodes' namespaces, and how
its namespaces are named so that they are told apart from every other lab's.

`hoplab lab exec`, typed many times a session, reads a node's namespace here and
execs `ip netns exec`; this module imports only `os`, `json` and `zlib` so that the
command costs little more than the `ip netns exec` it becomes (the full record,
hoplab.lab.state, takes another 15 to 20 ms to import: dataclasses, pathlib).
The directories are hoplab.nodes.rundir's and hoplab.nodes.netns's (which import
only `os` too).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Sequence

from hoplab.errors import LabError
from hoplab.nodes import netns, rundir
from hoplab.nodes.rundir import record_path
from hoplab.spec.names import lab_name

DEFAULT_RUN_DIR = rundir.DEFAULT_RUN_DIR
# Another directory makes another hoplab instance on this machine, with labs of its own
# (docs/labs.md): a test suite's, say, beside a user's.
RUN_DIR = rundir.RUN_DIR
LABS_DIR = rundir.LABS_DIR
NETNS_DIR = netns.NETNS_DIR
__all__ = ["LABS_DIR", "NETNS_DIR", "RUN_DIR", "record_path"]


def _instance_prefix(run_dir: str) -> str:
    """How this instance's namespace names start: `hoplab-` under the default run dir,
    `hoplab-TOKEN~` under another (TOKEN: 8 hex digits of its path's CRC-32), so that a
    clean under one run dir never takes another's namespaces for leftovers of its own."""
    real = os.path.realpath(run_dir)
    if real == os.path.realpath(DEFAULT_RUN_DIR):
        return "hoplab-"
    return f"hoplab-{zlib.crc32(real.encode()):08x}~"


NETNS_PREFIX = _instance_prefix(RUN_DIR)


def netns_prefix(lab: str) -> str:
    """The start of the name of every namespace of lab `lab` (its nodes' and its wires'),
    and of no other lab's: a lab name never holds the '.' that ends it, so lab `a`'s
    `hoplab-a.b-c` and lab `a-b`'s `hoplab-a-b.c` differ, and `hoplab-t.` is not a
    prefix of lab `t-1`'s names."""
    return f"{NETNS_PREFIX}{lab}."


def _parse(namespace: str) -> tuple[str, str] | None:
    """(instance prefix, lab) of a namespace named as some hoplab instance names its
    labs' (`hoplab-[TOKEN~]LAB.REST`); None for any other name."""
    if not namespace.startswith("hoplab-"):
        return None
    head, dot, rest = namespace.partition(".")
    if not (dot and rest):
        return None
    token, tilde, lab = head.removeprefix("hoplab-").rpartition("~")
    if tilde and not (len(token) == 8 and set(token) <= set("0123456789abcdef")):
        return None
    try:
        lab_name(lab)     # never holds a '.' or a '~'
    except ValueError:
        return None
    return f"hoplab-{token}{tilde}", lab


def lab_of(namespace: str) -> str | None:
    """The lab of this instance (this run dir) that `namespace` belongs to by its name;
    None for a name no lab of this instance has."""
    parsed = _parse(namespace)
    return parsed[1] if parsed is not None and parsed[0] == NETNS_PREFIX else None


def other_instance(namespace: str) -> bool:
    """`namespace` is named as a lab's of a hoplab under another run dir."""
    parsed = _parse(namespace)
    return parsed is not None and parsed[0] != NETNS_PREFIX


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
