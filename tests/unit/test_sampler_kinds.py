"""One list of sampler kinds: the experiment file's (spec), which the samplers use."""

from __future__ import annotations

import pytest

from hoplab.nodes.fake import FakeExecutor
from hoplab.samplers import runner
from hoplab.spec import experiment


def test_the_samplers_use_the_specs_list() -> None:
    # Two tuples that happened to be equal drifted apart silently; there is one.
    assert runner.SAMPLER_KINDS is experiment.SAMPLER_KINDS
    assert runner.NODE_KINDS | {"cpu"} == set(experiment.SAMPLER_KINDS)


def test_every_node_kind_the_spec_accepts_is_sampled() -> None:
    node_kinds = frozenset(experiment.SAMPLER_KINDS) - {"cpu"}
    samplers = runner.Samplers([runner.Target("r1", FakeExecutor("r1"), node_kinds)], cpu=True,
                               clock_zero=0.0)
    assert samplers.targets[0].kinds == node_kinds
    with pytest.raises(ValueError, match="unknown kind"):
        runner.Samplers([runner.Target("r1", FakeExecutor("r1"), frozenset({"gpu"}))], cpu=False,
                        clock_zero=0.0)
