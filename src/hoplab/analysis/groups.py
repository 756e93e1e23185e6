"""Pairing two selections test by test, variant by variant, before comparing them.

A selection such as qos=on holds several tests, and a label selection such as
version=v2 may hold every variant of a matrix; pooling a 1-hop run with a 5-hop
run would compare hops, not versions. So each side is split into groups by
experiment, test and variant value, leaving out the "contrast": what is one
value on A, another on B (qos off / on). Groups with the same key are compared.

compare_groups is the one place that decides groups and verdicts: `hoplab
compare`, the HTML report and the dashboard all call it and only render its
result. split_sides is how the report finds A and B in one set of runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hoplab import metrics as registry
from hoplab.analysis.compare import (
    MetricComparison,
    MetricKey,
    check_measurement_version,
    compare_runs,
    parse_metric,
)
from hoplab.analysis.order import natural_key
from hoplab.analysis.verdict_rule import MARGIN_PCT, Rule, judge
from hoplab.errors import UsageError
from hoplab.record import RunRecord

_MISSING = "(none)"


@dataclass(frozen=True)
class GroupComparison:
    title: str                      # what both sides share: "qos-under-load / bulk"
    kind: str                       # A's test kind
    a_label: str                    # what is A's own: "qos=off" ("" if nothing differs)
    b_label: str
    a_ids: tuple[int, ...]
    b_ids: tuple[int, ...]
    warnings: tuple[str, ...]
    metrics: tuple[MetricComparison, ...]


@dataclass(frozen=True)
class Comparison:
    groups: tuple[GroupComparison, ...]
    unmatched: tuple[str, ...]      # groups found on one side only, not compared
    alpha: float = 0.05             # the level of the test and of the interval (1 - alpha)
    margin_pct: float = MARGIN_PCT  # "same": the interval within +-margin_pct


def _dim(run: RunRecord, dim: str) -> str:
    if dim in ("experiment", "test"):
        return str(getattr(run, dim))
    value = run.variant.get(dim[2:]) if dim.startswith("v:") else run.labels.get(dim[2:])
    return _MISSING if value is None else value if isinstance(value, str) else json.dumps(value)


def _contrast(a: Sequence[RunRecord], b: Sequence[RunRecord], dims: list[str]) -> list[str]:
    out = []
    for d in dims:
        va, vb = {_dim(r, d) for r in a}, {_dim(r, d) for r in b}
        if len(va) == 1 and len(vb) == 1 and va != vb:
            out.append(d)
    return out


def _show(dim: str, value: str) -> str:
    return value if dim in ("experiment", "test") else f"{dim[2:]}={value}"


def split_values(runs: Sequence[RunRecord]
                 ) -> tuple[str, list[list[RunRecord]]] | None:
    """The runs split by the one variant key that varies (its values in natural order:
    qos=off before qos=on, hops 1, 2, 4), else, when no variant key varies, by the one
    label key that does. None when that is ambiguous (no key, or several)."""
    for prefix, keys in (("v:", {k for r in runs for k in r.variant}),
                         ("l:", {k for r in runs for k in r.labels})):
        varying = {k: {_dim(r, prefix + k) for r in runs} for k in sorted(keys)}
        varying = {k: v for k, v in varying.items() if len(v) > 1}
        if not varying:
            continue
        if len(varying) != 1:
            return None
        ((key, values),) = varying.items()
        return key, [[r for r in runs if _dim(r, prefix + key) == v]
                     for v in sorted(values, key=natural_key)]
    return None


def split_sides(runs: Sequence[RunRecord]) -> tuple[str, list[RunRecord], list[RunRecord]] | None:
    """A and B in one set of runs (split_values into exactly two: A the lower value);
    None when ambiguous or more than two values: then say what to compare."""
    found = split_values(runs)
    if found is None or len(found[1]) != 2:
        return None
    key, (low, high) = found
    return key, low, high


def compare_groups(a: Sequence[RunRecord], b: Sequence[RunRecord],
                   metrics: Sequence[str] | None = None, *,
                   per_flow: bool | Callable[[str], bool] = False, seed: int = 0,
                   resamples: int = 2000, alpha: float = 0.05,
                   margin_pct: float = MARGIN_PCT, rule: Rule = judge) -> Comparison:
    """Compare A with B group by group (see the module doc), each metric judged by `rule`
    (analysis/verdict_rule.py; margin_pct: what "same" must show). per_flow: also each
    flow's figures, for every group, or for the groups of the test kinds it says yes to
    (kinds.per_flow: custom tests, whose flows have different jobs). UsageError if the
    runs were measured differently or no group appears on both sides."""
    check_measurement_version(a, b)
    sides = _Sides(a, b)
    ga, gb = sides.split(a), sides.split(b)
    unmatched = tuple(
        f"{name}'s {sides.title(k)} ({len(g)} run{'s' * (len(g) != 1)}) has no counterpart "
        f"in {other}" for name, mine, other, theirs in (("A", ga, "B", gb), ("B", gb, "A", ga))
        for k, g in mine.items() if k not in theirs)
    wanted = [parse_metric(m) for m in metrics] if metrics else None
    have = {m.name for r in (*a, *b) for m in r.metrics}
    for w in wanted or ():
        registry.require(w.name, have)      # a typo lists the names there are
    groups = []
    for key, ra in ga.items():
        rb = gb.get(key)
        names = None if rb is None or wanted is None else _present(wanted, (*ra, *rb))
        if rb is None or names == []:
            continue
        flows = per_flow(ra[0].kind) if callable(per_flow) else per_flow
        found = compare_runs(ra, rb, names, per_flow=flows, seed=seed, resamples=resamples,
                             alpha=alpha, margin_pct=margin_pct, rule=rule)
        unknown = sorted({m.metric for m in found if registry.find(m.metric) is None})
        groups.append(GroupComparison(
            title=sides.title(key), kind=ra[0].kind, a_label=sides.label(ra),
            b_label=sides.label(rb), a_ids=tuple(r.id or 0 for r in ra),
            b_ids=tuple(r.id or 0 for r in rb),
            warnings=(*_warnings(ra, rb), *(
                f"metric {n} is not in hoplab's metric registry (a newer hoplab or an "
                "import stored it): no verdict" for n in unknown)),
            metrics=tuple(found)))
    groups.sort(key=lambda g: natural_key(g.title))
    if not groups:
        what = "metric " + ", ".join(metrics) if metrics else "test and variant"
        raise UsageError(
            f"nothing to compare: no {what} appears on both sides (A holds "
            f"{'; '.join(map(sides.title, ga)) or '-'}, B holds "
            f"{'; '.join(map(sides.title, gb)) or '-'})")
    return Comparison(groups=tuple(groups), unmatched=unmatched, alpha=alpha,
                      margin_pct=margin_pct)


class _Sides:
    """How A and B split into groups: by experiment, test and every variant key, less
    the contrast (what is one value on every run of A and another on every run of B)."""

    def __init__(self, a: Sequence[RunRecord], b: Sequence[RunRecord]) -> None:
        runs = (*a, *b)
        dims = ["experiment", "test", *(f"v:{k}" for k in sorted({k for r in runs
                                                                   for k in r.variant}))]
        self.contrast = _contrast(a, b, dims)
        self.label_contrast = _contrast(a, b, [f"l:{k}" for k in sorted({k for r in runs
                                                                         for k in r.labels})])
        self.shared = [d for d in dims if d not in self.contrast]

    def split(self, side: Sequence[RunRecord]) -> dict[tuple[str, ...], list[RunRecord]]:
        groups: dict[tuple[str, ...], list[RunRecord]] = {}
        for r in sorted(side, key=lambda r: r.id or 0):
            groups.setdefault(tuple(_dim(r, d) for d in self.shared), []).append(r)
        return groups

    def title(self, key: tuple[str, ...]) -> str:
        parts = [_show(d, v) for d, v in zip(self.shared, key, strict=True)
                 if not (d.startswith("v:") and v == _MISSING)]
        return " / ".join(parts) or "all runs"

    def label(self, side: Sequence[RunRecord]) -> str:
        return " ".join(_show(d, _dim(side[0], d))
                        for d in (*self.contrast, *self.label_contrast))


def _present(wanted: Sequence[MetricKey], runs: Sequence[RunRecord]) -> list[str]:
    """The metrics asked for that some of these runs have."""
    have = {(m.name, m.flow, m.node, m.key) for r in runs for m in r.metrics}
    return [str(w) for w in wanted if (w.name, w.flow, w.node, w.key) in have]


def _warnings(a: Sequence[RunRecord], b: Sequence[RunRecord]) -> list[str]:
    out = []
    kinds = ({r.kind for r in a}, {r.kind for r in b})
    if kinds[0] != kinds[1]:
        out.append(f"different test kinds: A is {'/'.join(sorted(kinds[0]))}, B is "
                   f"{'/'.join(sorted(kinds[1]))}; the figures share names, not meaning")
    versions = tuple({str(r.metadata.get("hoplab_version", "?")) for r in side}
                     for side in (a, b))
    if versions[0] != versions[1]:
        out.append(f"different hoplab versions: A ran {', '.join(sorted(versions[0]))}, B ran "
                   f"{', '.join(sorted(versions[1]))}; part of a change may be hoplab's own")
    for name, side in (("A", a), ("B", b)):
        out.extend(f"run {r.id} ({name}) is {r.status}: its figures may be partial"
                   for r in side if r.status != "ok")
    return out
