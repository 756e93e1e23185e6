"""The one order of values that people read: natural, so hops=2 comes before hops=10
and v1.9 before v1.10. Summaries, the report, the dashboard, plots and analysis all
sort variant values, labels and titles with natural_key."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

Key = tuple[int, float, tuple[tuple[int, int, str], ...]]


def natural_key(value: Any) -> Key:
    """Numbers by value, before text; text by its runs of digits as numbers
    ("v1.9" < "v1.10", "cpu2" < "cpu10"); booleans as false < true; None last."""
    if value is None:
        return (2, 0.0, ())
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        value = json.dumps(value, sort_keys=True)
    if isinstance(value, int | float):
        return (0, float(value), ())
    return (1, 0.0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                          for p in re.split(r"(\d+)", value) if p))


def variant_key(variant: Mapping[str, Any]) -> tuple[Key, ...]:
    """A variant (or a set of labels) by its values in natural order, key by key."""
    return tuple(natural_key(v) for v in variant.values())
