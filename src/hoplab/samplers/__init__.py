"""Counters sampled on lab nodes while a test runs: CPU, interfaces, qdiscs, TCP."""

from hoplab.samplers.runner import SAMPLER_KINDS, Samplers, Target
from hoplab.samplers.summary import counter_delta, sampler_metrics

__all__ = ["SAMPLER_KINDS", "Samplers", "Target", "counter_delta", "sampler_metrics"]
