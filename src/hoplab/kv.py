"""KEY=VALUE items: --filter, --label, --set, the dashboard's filters, selections and
metric keys all read them here, so they accept the same things and say the same
precise thing about an item they refuse.

    split("hops=2", "--filter", "--filter hops=2")    -> ("hops", "2")
    parse(["hops=2", "qos=on"], "--filter", "--filter hops=2") -> {"hops": "2", "qos": "on"}
"""

from __future__ import annotations

from collections.abc import Iterable

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
