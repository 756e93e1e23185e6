"""Which nodes a test's samplers read: a device's CPU is its own, a namespace's the host's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from hoplab.nodes.executor import LOCAL_MACHINE, Executor
from hoplab.nodes.fake import FakeExecutor
from hoplab.run.execute import sampler_targets
from hoplab.spec.experiment import Samplers


def _targets(kinds: tuple[str, ...]) -> dict[str, frozenset[str]]:
    test = cast(Any, SimpleNamespace(samplers=Samplers(nodes=("router", "ns"), kinds=kinds)))
    nodes: dict[str, Executor] = {"router": FakeExecutor("router", machine="ssh:10.0.0.1"),
                                  "ns": FakeExecutor("ns", machine=LOCAL_MACHINE)}
    return {t.node: t.kinds for t in sampler_targets(test, cast(Any, None), nodes)}


def test_cpu_alone_reads_a_device_but_not_a_namespace() -> None:
    # Before, `kinds = ["cpu"]` read nothing on a device: its CPU was never sampled.
    assert _targets(("cpu",)) == {"router": frozenset()}


def test_other_kinds_read_every_chosen_node() -> None:
    assert _targets(("cpu", "ifaces")) == {"router": frozenset({"ifaces"}),
                                           "ns": frozenset({"ifaces"})}
    assert _targets(()) == {}
