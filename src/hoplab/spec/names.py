"""The rules for lab and node names, wherever a name comes from: a lab file, an
experiment file or the command line (`--name`, `--lab-name`, `lab down NAME`,
`lab exec LAB NODE`, `clean NAME`).

A lab name becomes part of namespace names (`hoplab-LAB.NODE`), interface
labels and the path of its state record, so it is never taken as given.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hoplab.errors import UsageError

_LAB_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,19}")
_NODE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,30}")


def lab_name(value: str) -> str:
    """`value` if it is a valid lab name; ValueError saying the rule if not."""
    if not _LAB_NAME.fullmatch(value):
        raise ValueError(f"invalid lab name {value!r}: use up to 20 of a-z, 0-9, '_' and "
                         f"'-', starting with a letter or digit")
    return value


def node_name(value: str) -> str:
    """`value` if it is a valid node name; ValueError saying the rule if not."""
    if not _NODE_NAME.fullmatch(value):
        raise ValueError(f"invalid node name {value!r}: use a letter, then up to 30 letters, "
                         f"digits, '_' or '-'")
    return value


def given(rule: Callable[[str], str], value: str, where: str) -> str:
    """A name given on the command line, checked by `rule`; a bad one is a UsageError
    (exit 2) naming the argument it came from."""
    try:
        return rule(value)
    except ValueError as e:
        raise UsageError(f"{where}: {e}") from None
