"""KEY=VALUE items: --filter, --label, --set, the dashboard's filters, selections and
metric keys all read them here, so they accept the same things and say the same
precise thing about an item they refuse.

    split("hops=2", "--filter", "--filter hops=2")    -> ("hops", "2")
    parse(["hops=2", "qos=on"], "--filter", "--filter hops=2") -> {"hops": "2", "qos": "on"}
    pairs({"hops": 2, "wireguard": False})                  -> "hops=2 wireguard=false"

text() and pairs() are the one way a variant or label value is printed, in every
command, plot and page: as the experiment file writes it (`false`, not Python's
`False`), which is also what a filter or a selection takes back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from hoplab.errors import UsageError


def split(item: str, what: str, example: str, *, empty_value: bool = False
          ) -> tuple[str, str]:
    """The key and value of `item`, both stripped of spaces.

    UsageError naming `what` (where the item came from, e.g. "--filter") and the item:
    no "=", nothing before it, or (unless `empty_value`) nothing after it. `example`
    is a correct item to show."""
    key, sep, value = item.partition("=")
    key, value = key.strip(), value.strip()
    if not sep:
        problem = "no '='"
    elif not key:
        problem = "no key before '='"
    elif not value and not empty_value:
        problem = "no value after '='"
    else:
        return key, value
    raise UsageError(f"{what} {item.strip()!r}: {problem}; expected KEY=VALUE, e.g. {example}")


def parse(items: Iterable[str], what: str, example: str, *, empty_value: bool = False
          ) -> dict[str, str]:
    """Every item's key and value in order (see split). A key given twice with two
    different values is an error: a run has one value per key, so a filter could
    match nothing and a label would silently lose one."""
    out: dict[str, str] = {}
    for item in items:
        key, value = split(item, what, example, empty_value=empty_value)
        if out.get(key, value) != value:
            raise UsageError(f"{what} {item.strip()!r}: {key} is given twice ({out[key]} and "
                             f"{value}); a key takes one value")
        out[key] = value
    return out


def text(value: Any) -> str:
    """A variant or label value as an experiment file writes it: text as it is, anything
    else as TOML and JSON write it (true, false, 2, 0.5, ["a", "b"])."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def pairs(values: Mapping[str, Any], empty: str = "-") -> str:
    """A variant or a set of labels: "hops=2 wireguard=false"; `empty` when there are none."""
    return " ".join(f"{k}={text(v)}" for k, v in values.items()) or empty
