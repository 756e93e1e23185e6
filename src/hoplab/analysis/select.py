"""Choosing runs: the one selection grammar and its one parser, for every command and
the dashboard.

A selection is one argument:

    12            one run
    12,14         a list
    12-15         a range (both ends included); lists and ranges mix: 3,7-9
    qos=on        every ok run whose column, label or variant key qos is "on"
    experiment=qos-under-load,test=bulk,qos=on    conditions that must all hold

Where a command takes two sides (compare A B, profile --diff A B, flamegraph --diff
A B, bisect's good and bad) each argument is one side: select_pair. Elsewhere several
arguments add their runs together (`report 3 version=v1`): select_many. A command of
one run takes a selection that names exactly one: select_one. A --filter (runs, trend,
the dashboard's filter box) narrows rather than chooses: conditions only, a comma and
a repeated --filter both meaning "and": conditions().

A condition selection takes finished runs only (status ok) unless it names a status
itself: a failed or interrupted run's figures are partial and would drag a median.
Run ids are taken as given, whatever their status. A selection that matches nothing
is an error saying why: an unknown key or value lists the known ones (check).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, get_args

from hoplab import kv, numbers
from hoplab.analysis.order import natural_key
from hoplab.errors import UsageError
from hoplab.record import Status
from hoplab.store.schema import FILTER_COLUMNS

if TYPE_CHECKING:
    from hoplab.store import Store

_IDS = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")
_SHOWN = 10
_GAP_CHUNK = 1000           # stored ids read at a time while looking for missing ones
_KNOWN = 40                 # keys or values a message lists at most
GRAMMAR = ("run ids (12, 12,14, 12-15) or KEY=VALUE conditions joined by commas "
           "(qos=on, test=bulk,version=v2)")


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


def parse_conditions(spec: str, what: str = "selection") -> dict[str, str]:
    """The KEY=VALUE conditions of `spec`, joined by commas; UsageError for a part that
    is not one (a run id among conditions included: `3,qos=on` is neither kind)."""
    parts = spec.split(",")
    for part in parts:
        if "=" not in part:
            raise UsageError(
                f"{what} {spec!r}: {part.strip()!r} is not a condition; a selection is "
                f"{GRAMMAR}")
    return kv.parse(parts, f"{what} {spec!r}, item", "qos=on")


def conditions(items: Iterable[str], what: str = "--filter") -> dict[str, str]:
    """Filters (`--filter`, the dashboard's box): every item's comma-joined conditions,
    all of which must hold. Run ids are refused here: a filter narrows by key."""
    parts: list[str] = []
    for item in items:
        if parse_ranges(item) is not None:
            raise UsageError(f"{what} {item!r}: a filter is KEY=VALUE conditions (test=bulk, "
                             "version=v1,test=bulk); for run ids write id=12")
        parse_conditions(item, what)
        parts += item.split(",")
    return kv.parse(parts, what, "test=bulk")


def select(store: Store, spec: str, *, limit: int | None = None) -> list[int]:
    """Ids of the runs `spec` selects, in id order for conditions, as written for ids.

    UsageError for a run id the store does not hold, a spec that is not a selection,
    conditions that match nothing (saying why: an unknown key or value lists the known
    ones), or more than `limit` runs. Ranges are checked in the store (id BETWEEN lo AND
    hi), so the work is bounded by the store, not by the numbers written.
    """
    ranges = parse_ranges(spec)
    if ranges is None:
        where = parse_conditions(spec)
        found = [r.id for r in store.list_runs({"status": "ok", **where},
                                               limit=None if limit is None else limit + 1,
                                               figures=False)]
        if not found:
            raise UsageError(f"no runs match {spec!r} in {store.describe()}"
                             f"{_why_empty(store, where)}")
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


def select_many(store: Store, specs: Sequence[str], *, limit: int | None = None
                ) -> list[int]:
    """The runs of every selection together, each once, in the order the selections and
    their runs come; UsageError if any selects nothing (see select)."""
    ids: dict[int, None] = {}
    for spec in specs:
        ids.update(dict.fromkeys(select(store, spec, limit=limit)))
    if limit is not None:
        _check_limit(" ".join(specs), len(ids), limit)
    return list(ids)


def select_one(store: Store, spec: str, what: str = "RUN") -> int:
    """The one run `spec` selects; UsageError if it selects several."""
    ids = select(store, spec)
    if len(ids) != 1:
        raise UsageError(f"{what} {spec!r} selects {len(ids)} runs ({_some(ids)}); this "
                         "command takes one: name it by id or narrow the conditions")
    return ids[0]


def select_pair(store: Store, a: str, b: str, *, limit: int | None = None
                ) -> tuple[list[int], list[int]]:
    """Both sides of a comparison, each at most `limit` runs; UsageError if either is
    empty, too large or they share a run."""
    sides = (select(store, a, limit=limit), select(store, b, limit=limit))
    shared = sorted(set(sides[0]) & set(sides[1]))
    if shared:
        raise UsageError(
            f"{a!r} and {b!r} overlap: both hold run {_some(shared)}; a run cannot be "
            "compared with itself, so narrow one side (add test=..., or a variant key)")
    return sides


def check(store: Store, where: Mapping[str, str]) -> None:
    """UsageError if a key of `where` is no column, label or variant key of any stored
    run, or a value one that none has, listing the known keys or values: filters that
    matched nothing because of a typo say so rather than show an empty list."""
    hints = _unknown(store, where)
    if hints:
        raise UsageError(f"filter {','.join(f'{k}={v}' for k, v in where.items())} "
                         f"matches no run in {store.describe()} ({'; '.join(hints)})")


def _check_limit(spec: str, count: int, limit: int | None) -> None:
    if limit is not None and count > limit:
        raise UsageError(f"{spec!r} selects more than {limit} runs; narrow it (add test=..., "
                         "or a variant key, or a shorter range)")


def _why_empty(store: Store, where: dict[str, str]) -> str:
    """Why conditions that are each well formed select no finished run, for a message."""
    hints = _unknown(store, where)
    if hints:
        return f" ({'; '.join(hints)})"
    if "status" not in where and store.list_runs(where, limit=1, figures=False):
        return " with status ok (only failed or interrupted runs do; add status=failed to " \
               "take those)"
    if len(where) > 1:
        return " (each condition holds for some run, but no run meets them all)"
    return ""


def _unknown(store: Store, where: Mapping[str, str]) -> list[str]:
    """For every condition no stored run meets on its own: what its key takes, or, for
    a key no run has, which keys there are. Read only when a selection came up empty."""
    hints = []
    for key, value in where.items():
        if key == "status":
            if value not in get_args(Status):
                hints.append(f"status takes {', '.join(get_args(Status))}")
        elif key == "id" or store.list_runs({key: value}, limit=1, figures=False):
            continue            # an id is checked by the store; this condition holds alone
        elif key in FILTER_COLUMNS or store.filter_values(key, limit=1):
            hints.append(f"{key} takes {_listed(_values(store, key))}")
        else:
            labels = store.label_keys(limit=_KNOWN + 1)
            hints.append(f"no run has {key}; the keys are the columns "
                         f"{', '.join(sorted(c for c in FILTER_COLUMNS))} and the runs' labels "
                         f"and variant keys: {_listed(labels) if labels else 'none'}")
    if hints and not store.count_runs():
        return ["the store holds no runs"]
    return hints


def _values(store: Store, key: str) -> list[str]:
    found = set(store.filter_values(key, limit=_KNOWN + 3))
    # A variant's true is stored as "true" and Python's "True" (store/labels.py): the
    # experiment file's spelling is the one to show.
    return [v for v in found
            if not (v in ("True", "False", "None") and
                    (v.lower() if v != "None" else "null") in found)]


def _listed(names: list[str]) -> str:
    shown = sorted(names, key=natural_key)[:_KNOWN]
    more = " and more" if len(names) > _KNOWN else ""
    return (", ".join(shown) + more) if shown else "no value"


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


def _some(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:_SHOWN])
    return shown if len(ids) <= _SHOWN else f"{shown} and {len(ids) - _SHOWN} more"
