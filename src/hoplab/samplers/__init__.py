"""Counters sampled on lab nodes while a test runs: CPU, interfaces, qdiscs, TCP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hoplab.samplers.runner import Samplers, Target
    from hoplab.samplers.summary import counter_delta, sampler_metrics

# The kinds of sampler are the experiment file's vocabulary: hoplab.spec.experiment.
__all__ = ["Samplers", "Target", "counter_delta", "sampler_metrics"]


def __getattr__(name: str) -> Any:
    # Imported on first use: the runner brings pyroute2 (0.1 s), which a reader of
    # stored samples (samplers.summary, the importers) does not need.
    if name in ("Samplers", "Target"):
        from hoplab.samplers import runner

        return getattr(runner, name)
    if name in ("counter_delta", "sampler_metrics"):
        from hoplab.samplers import summary

        return getattr(summary, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
