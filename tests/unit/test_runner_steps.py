"""The runner's steps, in order, for `hoplab run` and for a fleet's job alike: the checks
once, then for each run its variant's lab, its test, its record stored. Run end to end
on fake nodes (a captured ping output answers the clients; nothing is built)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hoplab.lab.build import UpResult
from hoplab.lab.caps import FEATURE_NAMES, QDISC_NAMES, TOOL_NAMES, Capabilities
from hoplab.lab.plan import plan_lab
from hoplab.lab.state import LabState
from hoplab.nodes.executor import Executor, Snapshot
from hoplab.nodes.fake import FakeExecutor
from hoplab.record import RunRecord
from hoplab.run.experiment import ExperimentRunner, measurement_version, schedule
from hoplab.spec.experiment import Experiment
from hoplab.spec.experiment_loader import load_experiment
from tests.helpers.sink import Sink

DATA = Path(__file__).resolve().parents[1] / "data"
LAB = 'name = "steps"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n'
EXPERIMENT = """lab = "lab.toml"
repeat = 2
seed = 7
pause = "0s"
[matrix]
interval = ["0.2s", "0.5s"]
[[tests]]
name = "p"
kind = "ping"
from = "a"
to = "b"
duration = "0.5s"
"""


class FakeLabRunner(ExperimentRunner):
    """The runner, its labs on fake nodes; says which variant's lab it built, and when."""

    built: list[int]

    def _lab_for(self, index: int) -> tuple[UpResult, dict[str, Any]]:
        self.built = getattr(self, "built", [])
        if self._up is None or self._up[0] != index:
            self.built.append(index)
            plan = plan_lab(self.exp.variants[index].lab)
            nodes: dict[str, Executor] = {}
            for n in plan.nodes:
                fake = FakeExecutor(n.name)
                fake.outputs["ping"] = (DATA / "ping" / "loopback_v4.txt").read_bytes()
                fake.snapshots = [Snapshot(net_dev=(DATA / "proc" / "net-dev-r1-tcp-load.txt")
                                           .read_text())]
                nodes[n.name] = fake
            self._nodes = nodes
            self._up = (index, UpResult(LabState(name=self.lab_name, source="fake"), plan,
                                        0.0), {})
        return self._up[1], self._up[2]

    def _down(self) -> None:
        self._up = None
        self._nodes = {}


# A machine that could build any lab: the checks pass, whatever this one has.
CAPS = Capabilities(kernel="6.1.0-test", qdiscs=dict.fromkeys(QDISC_NAMES, True),
                    features=dict.fromkeys(FEATURE_NAMES, True),
                    tools=dict.fromkeys(TOOL_NAMES, "1.0"))


def _experiment(tmp_path: Path) -> Experiment:
    (tmp_path / "lab.toml").write_text(LAB)
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    return load_experiment(tmp_path / "exp.toml")


def _seen(records: list[RunRecord]) -> list[tuple[Any, ...]]:
    return [(r.order, r.variant["interval"], r.repetition, r.status, r.measurement_version,
             r.experiment_id) for r in records]


def test_run_stores_every_run_in_its_order(tmp_path: Path) -> None:
    exp = _experiment(tmp_path)
    sink = Sink()
    runner = FakeLabRunner(exp, sink, caps=CAPS, lab_name="steps")
    records = runner.run()
    jobs = schedule(exp)
    assert len(records) == len(jobs) == 4
    assert sink.saved == records == runner.records
    version = measurement_version("ping")
    assert _seen(records) == [
        (i, exp.variants[j.variant].values["interval"], j.repetition, "ok", version,
         runner.experiment_id) for i, j in enumerate(jobs)]
    assert all(any(m.name == "rtt_mean" for m in r.metrics) for r in records)
    # A lab is built when a run needs another variant's, and nothing is left up.
    changes = [j.variant for k, j in enumerate(jobs)
               if k == 0 or j.variant != jobs[k - 1].variant]
    assert runner.built == changes and runner.lab_variant is None


def test_a_fleets_jobs_are_the_same_runs(tmp_path: Path) -> None:
    exp = _experiment(tmp_path)
    whole = FakeLabRunner(exp, Sink(), caps=CAPS, lab_name="steps")
    whole.run()
    one_by_one = FakeLabRunner(exp, Sink(), caps=CAPS,
                               lab_name="steps")
    one_by_one.experiment_id = whole.experiment_id
    got = [one_by_one.run_job(job, order) for order, job in enumerate(schedule(exp))]
    # The lab stays up between a variant's jobs, until close.
    assert one_by_one.lab_variant == schedule(exp)[-1].variant
    one_by_one.close()
    assert one_by_one.lab_variant is None
    assert _seen(got) == _seen(whole.records)
