"""Which figures summarise a run of each test kind, in the order a reader wants them.

Their labels and units are in the metric registry (hoplab/metrics.py)."""

from __future__ import annotations

from collections.abc import Mapping

from hoplab.kinds import HEADLINES

# Each kind declares its own (hoplab.kinds); this view reads them from the registry.
HEADLINE: Mapping[str, tuple[str, ...]] = HEADLINES
