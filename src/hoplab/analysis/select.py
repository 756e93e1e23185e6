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

from hoplab import kv, numbers
from hoplab.analysis.order import natural_key
from hoplab.errors import UsageError
from hoplab.store import Store

_IDS = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")
_SHOWN = 10
_GAP_CHUNK = 1000           # stored ids read at a time while looking for missing ones
_HINT_RUNS = 5000           # runs read to say which values a key takes


def parse_ranges(spec: str) -> list[tuple[int, int]] | None:
    """The id ranges `spec` names, as written (a single id is lo == hi), or None if it
    is not ids. Nothing here grows with the ranges' lengths: 1-999999999999 is two ints."""
    if not _IDS.match(spec):
        return None
    ranges = []
    for part in spec.split(","):
        lo, _, hi = (p.strip() for p in part.partition("-"))
        # A range may end past the largest id (1-99999999999999999999 means "1 on"), but
        # not at a number whose reading alone costs time (hoplab.numbers).
        first, last = (numbers.whole(x, "run id", most=10**30) for x in (lo, hi or lo))
        if last < first:
            raise UsageError(f"run range {part.strip()!r} runs backwards; write {last}-{first}")
        ranges.append((first, last))
    return ranges


def _union_size(ranges: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for lo, hi in sorted(ranges):
        if hi > end:
            total += hi - max(lo, end + 1) + 1
            end = hi
    return total


def _gaps(store: Store, lo: int, hi: int) -> list[tuple[int, int]]:
    """The first few stretches of ids from `lo` to `hi` that the store does not hold,
    found a chunk of stored ids at a time (the range may be far longer than the store)."""
    gaps: list[tuple[int, int]] = []
    nxt = lo
    while nxt <= hi and len(gaps) <= _SHOWN:
        found = store.ids_between(nxt, hi, limit=_GAP_CHUNK)
        for i in found:
            if i > nxt:
                gaps.append((nxt, i - 1))
            nxt = i + 1
        if len(found) < _GAP_CHUNK:
            if nxt <= hi:
                gaps.append((nxt, hi))
            break
    return gaps


def _missing(store: Store, ranges: list[tuple[int, int]]) -> str | None:
    """The ids of `ranges` the store does not hold, for a message; None if it holds all."""
    gaps: list[tuple[int, int]] = []
    count = 0
    for lo, hi in ranges:
        if store.count_ids(lo, hi) == hi - lo + 1:
            continue
        found = _gaps(store, lo, hi)
        count += len(found)
        gaps += found
    if not gaps:
        return None
    shown = []
    for lo, hi in gaps[:_SHOWN]:
        shown += [str(i) for i in range(lo, hi + 1)] if hi - lo < 2 else [f"{lo}-{hi}"]
    more = " and more" if count > _SHOWN else ""
    return ", ".join(shown) + more


def parse_filters(spec: str) -> dict[str, str]:
    for part in spec.split(","):
        if "=" not in part:
            raise UsageError(
                f"selection {spec!r}: {part.strip()!r} is neither a run id, a range (12-15) "
                "nor KEY=VALUE (qos=on, test=bulk, version=v2)")
    return kv.parse(spec.split(","), f"selection {spec!r}, item", "qos=on")


def select(store: Store, spec: str, *, limit: int | None = None) -> list[int]:
    """Ids of the runs `spec` selects, in id order for key=value, as written for ids.

    UsageError for a run id the store does not hold, a spec that is not a selection,
    or more than `limit` runs; an empty list when key=value matches nothing
    (select_pair says why). Ranges are checked in the store (id BETWEEN lo AND hi), so
    the work is bounded by the store, not by the numbers written.
    """
    ranges = parse_ranges(spec)
    if ranges is None:
        filters = parse_filters(spec)
        filters.setdefault("status", "ok")
        found = [r.id for r in store.list_runs(filters, limit=None if limit is None
                                               else limit + 1)]
        _check_limit(spec, len(found), limit)
        return found
    missing = _missing(store, ranges)
    if missing:
        raise UsageError(f"no run {missing} in {store.describe()}")
    # Every id is stored now, so the union is at most the store's size.
    _check_limit(spec, _union_size(ranges), limit)
    ids: dict[int, None] = {}
    for lo, hi in ranges:
        ids.update(dict.fromkeys(range(lo, hi + 1)))
    return list(ids)


def _check_limit(spec: str, count: int, limit: int | None) -> None:
    if limit is not None and count > limit:
        raise UsageError(f"{spec!r} selects more than {limit} runs; narrow it (add test=..., "
                         "or a variant key, or a shorter range)")


def select_pair(store: Store, a: str, b: str, *, limit: int | None = None
                ) -> tuple[list[int], list[int]]:
    """Both sides of a comparison, each at most `limit` runs; UsageError if either is
    empty, too large or they share a run."""
    sides = (select(store, a, limit=limit), select(store, b, limit=limit))
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
    if "status" not in filters and store.list_runs(filters, limit=1):
        return " with status ok (only failed or interrupted runs do; add status=failed to " \
               "take those)"
    # The first runs are enough to show the values in use, and keep this bounded.
    runs = store.list_runs(limit=_HINT_RUNS)
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
        hints.append(f"{key} takes {', '.join(sorted(seen, key=natural_key))}" if seen
                     else f"no run has {key}")
    return f" ({'; '.join(hints)})"
