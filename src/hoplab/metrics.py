"""The one registry of metrics: every summary figure a run can carry, with its
unit, its label and which direction is better.

Tables, plots, compare, the report and the dashboard read labels, units and
directions here and nowhere else. A figure that is not registered is an error
in the test suite (tests/unit/test_metrics_registry.py), never a silent "n/a".

SKELETON: the registry's API is fixed here; its table is being filled in
(issue 10). Add an entry for every metric name you introduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# "neutral": a figure that describes a run without judging it (packets sent,
# bytes, interface counters). It is stated explicitly so that a new metric can
# never fall through to "no verdict" by accident.
Better = Literal["higher", "lower", "neutral"]


@dataclass(frozen=True)
class MetricDef:
    name: str       # exact name, or a family prefix ending in "." or "_*" (see lookup)
    unit: str       # the unit the value is stored in: "bit/s", "ms", "%", "count", ...
    label: str      # what a table or axis calls it
    better: Better


class UnknownMetric(KeyError):
    """A metric name with no entry in the registry."""


_REGISTRY: dict[str, MetricDef] = {}


def register(*defs: MetricDef) -> None:
    for d in defs:
        if d.name in _REGISTRY and _REGISTRY[d.name] != d:
            raise ValueError(f"metric {d.name} registered twice, differently")
        _REGISTRY[d.name] = d


def lookup(name: str) -> MetricDef:
    """The definition of `name`; raises UnknownMetric for an unregistered name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownMetric(name) from None


def all_metrics() -> list[MetricDef]:
    return sorted(_REGISTRY.values(), key=lambda d: d.name)
