"""Choosing runs to compare: run ids, ranges, or key=value selections.

    12            one run
    12,14         a list
    12-15         a range (both ends included); lists and ranges mix: 3,7-9
    qos=on        every ok run whose column, label or variant key qos is "on"
    experiment=qos-under-load,test=bulk,qos=on    all of them at once

A key=value selection takes finished runs only (status ok) unless it names a
status itself: a failed or interrupted run's figures are partial and would
drag a median. Run ids are taken as given, whatever their status.
"""

from __future__ import annotations

import re

from hoplab.errors import UsageError
from hoplab.store import Store

_IDS = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")
# Above this many ids one listing of the store is cheaper than a query per id.
_PER_ID_LOOKUPS = 20
_SHOWN = 10


def parse_ids(spec: str) -> list[int] | None:
    """The run ids `spec` names in order without repeats, or None if it is not ids."""
    if not _IDS.match(spec):
        return None
    ids: dict[int, None] = {}
    for part in spec.split(","):
        lo, _, hi = (p.strip() for p in part.partition("-"))
        first, last = int(lo), int(hi or lo)
        if last < first:
            raise UsageError(f"run range {part.strip()!r} runs backwards; write {last}-{first}")
        ids.update(dict.fromkeys(range(first, last + 1)))
    return list(ids)


def parse_filters(spec: str) -> dict[str, str]:
    filters: dict[str, str] = {}
    for part in spec.split(","):
        key, sep, value = (p.strip() for p in part.partition("="))
        if not sep or not key or not value:
            raise UsageError(
                f"selection {spec!r}: {part.strip()!r} is neither a run id, a range (12-15) "
                "nor KEY=VALUE (qos=on, test=bulk, version=v2)")
        if filters.get(key, value) != value:
            raise UsageError(f"selection {spec!r}: {key} is given twice ({filters[key]} "
                             f"and {value}); a run has one value per key")
        filters[key] = value
    return filters


def select(store: Store, spec: str) -> list[int]:
    """Ids of the runs `spec` selects, in id order for key=value, as written for ids.

    UsageError for a run id the store does not hold or a spec that is not a selection;
    an empty list when key=value matches nothing (select_pair says why).
    """
    ids = parse_ids(spec)
    if ids is None:
        filters = parse_filters(spec)
        filters.setdefault("status", "ok")
        return [r.id for r in store.list_runs(filters)]
    if len(ids) > _PER_ID_LOOKUPS:
        known = {r.id for r in store.list_runs()}
        missing = [i for i in ids if i not in known]
    else:
        missing = [i for i in ids if not store.list_runs({"id": str(i)})]
    if missing:
        raise UsageError(f"no run {_some(missing)} in {store.describe()}")
    return ids


def select_pair(store: Store, a: str, b: str) -> tuple[list[int], list[int]]:
    """Both sides of a comparison; UsageError if either is empty or they share a run."""
    sides = (select(store, a), select(store, b))
    for spec, ids in zip((a, b), sides, strict=True):
        if not ids:
            raise UsageError(f"no runs match {spec!r} in {store.describe()}{_hint(store, spec)}")
    shared = sorted(set(sides[0]) & set(sides[1]))
    if shared:
        raise UsageError(
            f"{a!r} and {b!r} overlap: both hold run {_some(shared)}; a run cannot be "
            "compared with itself, so narrow one side (add test=..., or a variant key)")
    return sides


def _some(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:_SHOWN])
    return shown if len(ids) <= _SHOWN else f"{shown} and {len(ids) - _SHOWN} more"


def _hint(store: Store, spec: str) -> str:
    """What the keys of an empty selection do take, since a typo is the usual cause."""
    filters = parse_filters(spec)
    if "status" not in filters and store.list_runs(filters):
        return " with status ok (only failed or interrupted runs do; add status=failed to " \
               "take those)"
    runs = store.list_runs()
    if not runs:
        return " (the store holds no runs)"
    hints = []
    for key in filters:
        seen: set[str] = set()
        for r in runs:
            row = {"experiment": r.experiment, "test": r.test, "kind": r.kind,
                   "status": r.status, "experiment_id": r.experiment_id or ""}
            found = row.get(key, r.labels.get(key, r.variant.get(key)))
            if found is not None:
                seen.add(str(found).lower() if isinstance(found, bool) else str(found))
        hints.append(f"{key} takes {', '.join(sorted(seen))}" if seen else f"no run has {key}")
    return f" ({'; '.join(hints)})"
