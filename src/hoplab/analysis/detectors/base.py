"""What a change-point detector is (the registry, and how to add one: __init__.py).

A detector places change points in a series of values (versions, commits), each value a
list of repetitions: `locate(values, min_size)` gives the index of the first value after
each change point, in order, with at least `min_size` values on each side. That is all
it decides. What a change point then reports (medians, change, interval, p) and the
power figures are measured by analysis/changepoints.py, the same way for every detector.

A detector's module is its face (name, summary, parameters) and loads its numerical work
(numpy, ruptures) when it first locates: `hoplab trend --help` lists the detectors
without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

MIN_SIZE = 2                # values on each side of a change point

Values = Sequence[Sequence[float]]


@dataclass(frozen=True)
class Detector:
    name: str                       # what --detector takes
    summary: str                    # one line: how it decides
    locate: Callable[[Values, int], list[int]]
    # The level of one decision, Bonferroni-corrected over the splits of a window, when
    # the detector decides by the rank test (analysis/ranks.py): the power figures are
    # that test's. None: it decides otherwise (a penalty), so it has no power figures.
    alpha: float | None = None
    window: int | None = None       # values one decision sees at most (None: all)
