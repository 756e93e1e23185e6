"""A run's labels and variant values as the text a filter names them by.

One place decides how `--filter KEY=VALUE` matches: a label is text already; a
variant value matches its Python text and its JSON (hops=2 matches 2,
flag=true and flag=True match True). The store keeps these texts in
run_labels, so a filter is an index lookup rather than a scan of JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def texts(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    try:
        return {str(value), json.dumps(value)}
    except (TypeError, ValueError):
        return {str(value)}


def label_rows(run_id: int, labels: Any, variant: Any) -> list[dict[str, Any]]:
    """The run_labels rows of one run (labels and variant are as stored: JSON objects,
    or anything else in a damaged row, which then has none)."""
    seen: set[tuple[str, str]] = set()
    for d in (labels, variant):
        if isinstance(d, Mapping):
            for key, value in d.items():
                for text in texts(value):
                    seen.add((str(key), text))
    return [{"run_id": run_id, "key": k, "value": v} for k, v in sorted(seen)]
