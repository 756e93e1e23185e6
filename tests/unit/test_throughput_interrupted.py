"""A throughput search cut short (Ctrl-C, SIGTERM) keeps the trials it ran: the search
holds them as they come, the kind's procedure leaves them in its Context's result, and
the orchestrator hands that result on with the interrupt, for the run stored
interrupted (hoplab.run.experiment)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hoplab.analysis.ndr import Trial
from hoplab.kind_registry import register, unregister
from hoplab.kinds.procedure import Context, Result
from hoplab.kinds.throughput import KIND, Searched, ThroughputOptions, _cut_short
from hoplab.kinds.throughput import _search as kind_search
from hoplab.lab.plan import plan_lab
from hoplab.nodes.executor import Executor
from hoplab.nodes.fake import FakeExecutor
from hoplab.record import Metric
from hoplab.run import execute
from hoplab.run.execute import run_test
from hoplab.spec.experiment_loader import load_experiment
from tests.helpers.lab_text import chain3


class _Interrupted:
    """A path that forwards 20,000 frames/s; the 3rd trial is interrupted."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def trial(self, fps: float, seconds: float, drain_s: float) -> Trial:
        self.calls.append(fps)
        if len(self.calls) == 3:
            raise KeyboardInterrupt
        return Trial(fps, round(fps), min(round(fps), 20_000), 1.0)


def test_a_search_cut_short_keeps_every_trial_it_finished() -> None:
    opts = ThroughputOptions(frame_sizes=("64",), losses_pct=(0.0,), flows=1, trial_s=1.0,
                             precision_pct=0.5, drain_s=0.0, latency=False)
    runner, so_far = _Interrupted(), Searched()
    with pytest.raises(KeyboardInterrupt):
        kind_search(runner, opts, 100_000, so_far)
    assert [t.rate_fps for t in so_far.trials] == runner.calls[:2]
    out = Result()
    _cut_short(out, "64", 100_000, [0.0, 1.5, 3.0], so_far)
    series = {s.name: s for s in out.series}
    assert series["throughput_trial"].t == [0.0, 1.5]
    assert series["throughput_trial"].v == runner.calls[:2]
    assert series["throughput_trial_loss"].v == [
        100 * (1 - min(r, 20_000) / r) for r in runner.calls[:2]]
    assert {(m.name, m.value) for m in out.metrics} == {("generator_fps", 100_000.0),
                                                        ("invalid_trials", 0.0)}


def _cut(ctx: Context) -> Result:
    ctx.result.metrics.append(Metric("ndr_fps", 1.0, "frames/s", key="64"))
    raise KeyboardInterrupt("signal 15")


def test_the_orchestrator_hands_on_what_an_interrupted_procedure_measured(
        tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(chain3("cut", ipv6=False))
    (tmp_path / "exp.toml").write_text(
        'lab = "lab.toml"\n[[tests]]\nname = "t"\nkind = "throughput"\nfrom = "client"\n'
        'to = "server"\nframe_sizes = [64]\nsamplers = { kinds = [] }\n')
    exp = load_experiment(tmp_path / "exp.toml")
    (test,) = exp.variants[0].tests
    plan = plan_lab(replace(exp.variants[0].lab, name="cut"))
    nodes: dict[str, Executor] = {n.name: FakeExecutor(n.name) for n in plan.nodes}
    cut: list[execute.TestResult] = []
    unregister("throughput")
    try:
        register(replace(KIND, procedure=_cut))
        with pytest.raises(KeyboardInterrupt):
            run_test(test, plan, tmp_path, nodes=nodes, interrupted=cut.append)
    finally:
        unregister("throughput")
        register(KIND)
    (result,) = cut
    assert [(m.name, m.key, m.value) for m in result.metrics] == [("ndr_fps", "64", 1.0)]
    assert result.duration_s >= 0


def test_throughput_runs_carry_their_own_measurement_version() -> None:
    """Trials changed meaning (none chosen among repeats): old throughput runs do not
    compare with new ones, and other kinds' runs keep hoplab's version."""
    from hoplab.record import MEASUREMENT_VERSION
    from hoplab.run.experiment import measurement_version
    assert measurement_version("throughput") == 4 > MEASUREMENT_VERSION
    assert measurement_version("tcp") == MEASUREMENT_VERSION == 3
