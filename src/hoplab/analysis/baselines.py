"""`hoplab baseline`: which value of which series a selection pins (analysis/changes.py
judges a series' latest runs against it; this only says what is pinned)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hoplab.analysis.changes import Series, series_of, x_of
from hoplab.analysis.trend import shown
from hoplab.errors import UsageError
from hoplab.store import RunSummary


def pins_of_selection(runs: Sequence[RunSummary], selection: str
                      ) -> list[tuple[Series, str | float, tuple[int, ...]]]:
    """For each series the finished runs of `selection` belong to: the one value of its
    order they hold and their ids. UsageError when the selection holds no finished run,
    or two values of one series (a baseline is one version, commit or invocation)."""
    groups: dict[Series, dict[str | float, list[int]]] = {}
    for r in runs:
        if r.status == "ok":
            series = series_of(r)
            groups.setdefault(series, {}).setdefault(x_of(r, series.by), []).append(r.id)
    if not groups:
        raise UsageError(f"selection {selection!r} holds no finished run to pin")
    out = []
    for series, values in groups.items():
        if len(values) > 1:
            said = ", ".join(shown(v, series.by) for v in list(values)[:5])
            raise UsageError(
                f"selection {selection!r} holds {len(values)} values of {series.by} of "
                f"series {series.title} ({said}{', ...' if len(values) > 5 else ''}); a "
                f"baseline is one value: add {series.by}=... to the selection")
        (value, ids), = values.items()
        out.append((series, value, tuple(ids)))
    return out


def value_text(value: str | float) -> str:
    """A pinned value as the store keeps it."""
    return json.dumps(value)
