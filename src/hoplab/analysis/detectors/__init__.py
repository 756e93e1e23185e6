"""The change-point detectors `hoplab trend --detector NAME` offers, by name.

A detector is one module that defines a Detector (base.py: a name, a line saying how it
decides, and `locate`), made known by one register() line below; a plug-in outside
hoplab registers its own the same way. Whichever detector places the change points, each
one's figures (medians, change, 95 % interval, p) and the power figures are measured by
analysis/changepoints.py, so detectors differ only in where they see steps.

bench/changepoints.py measures every registered detector on the same generated series
(docs/trend.md has the figures): edivisive, the default, has the best F1 there.
"""

from __future__ import annotations

from hoplab.analysis.detectors import binseg, edivisive, pelt
from hoplab.analysis.detectors.base import MIN_SIZE, Detector
from hoplab.errors import UsageError

__all__ = ["DEFAULT", "MIN_SIZE", "Detector", "get", "names", "register", "unregister"]

DEFAULT = "edivisive"

_REGISTRY: dict[str, Detector] = {}


def register(detector: Detector) -> None:
    """Make `detector` available by its name; ValueError if the name is taken."""
    if detector.name in _REGISTRY:
        raise ValueError(f"a change-point detector named {detector.name!r} is registered "
                         "already")
    _REGISTRY[detector.name] = detector


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def names() -> list[str]:
    """The registered detectors' names, in the order they were registered."""
    return list(_REGISTRY)


def get(name: str) -> Detector:
    """The detector of that name; UsageError naming the registered ones if none."""
    found = _REGISTRY.get(name)
    if found is None:
        raise UsageError(f"no change-point detector {name!r}: choose one of "
                         f"{', '.join(_REGISTRY)}")
    return found


register(edivisive.DETECTOR)
register(pelt.DETECTOR)
register(binseg.DETECTOR)
