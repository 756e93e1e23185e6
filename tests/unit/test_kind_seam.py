"""A test kind is one module: this file is that module, and nothing else changes.

The kind `blip` (a toy: a tool `blipper` sends `count` blips to the test's `to` node and
prints each one's round trip in ms, or `lost`) declares a new option of its own, the
type of its flows' options, its tool, its collector and its figures, and registers
itself. With that alone an experiment file may ask for it (a bad `count` is an error
naming file, line and key, in a test and in a custom test's flow), its keys are
documented from its declaration, and a run of it goes end to end on fake nodes: its
client started with its option, its output collected, its figures computed, stored
and read back, and shown in the summary under its headline.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from hoplab import metrics
from hoplab.errors import SpecError
from hoplab.kind_registry import FlowTool, Kind, Option, Reader, register, unregister
from hoplab.kinds import metrics_of
from hoplab.kinds.doc import option_table
from hoplab.kinds.flow import ClientTimes, Outcome, address
from hoplab.lab.plan import Plan, plan_lab
from hoplab.nodes.executor import Executor
from hoplab.nodes.fake import FakeExecutor
from hoplab.record import Metric, RunRecord, Series
from hoplab.render.summary import summary_rows
from hoplab.run.execute import run_test
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase, Test
from hoplab.spec.experiment_loader import load_experiment
from hoplab.spec.locate import Path as KeyPath
from hoplab.store import open_store
from tests.helpers.lab_text import chain3

# --- the kind `blip`: its whole module --------------------------------------------------

BLIP_METRICS = (metrics.MetricDef("blip_median", "ms", "blip RTT median", "lower"),
                metrics.MetricDef("blip_loss", "%", "blips lost", "lower"))
BLIP_STEP_S = 0.1   # between two blips


def _count(value: object) -> int:
    n = ov.positive_int(value)
    if n > 100:
        raise ValueError(f"at most 100 blips, got {n}")
    return n


OPTIONS = {"count": Option(_count, "blips to send (1-100)", "3"),
           "duration": Option(ov.duration, "how long the test lasts", '`"1s"`')}


@dataclass(frozen=True)
class BlipOptions:
    count: int = 3


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: KeyPath) -> tuple[list[Flow], list[Phase]]:
    assert src is not None and dst is not None
    return [Flow(name=name, kind="blip", src=src, dst=dst, start_s=o.get("start", 0.0),
                 duration_s=o.get("duration", 1.0),
                 options=BlipOptions(count=o.get("count", 3)))], []


def _client(flow: Flow, index: int, plan: Plan) -> list[str]:
    count = flow.options_as(BlipOptions).count
    return ["blipper", "-c", str(count), address(plan, flow.dst, flow.family)]


def _collect(out: Outcome, text: str, t0: float, times: ClientTimes,
             window: tuple[float, float]) -> None:
    start = times.started - t0
    lines = text.split()
    answered = [(start + i * BLIP_STEP_S, float(x)) for i, x in enumerate(lines) if x != "lost"]
    out.series.append(Series("blip_rtt", "ms", [t for t, _ in answered],
                             [v for _, v in answered], flow=out.flow.name))
    out.metrics.append(Metric("blip_loss", 100 * (len(lines) - len(answered)) / len(lines),
                              "%", flow=out.flow.name))


def _figures(test: Test, outcomes: Sequence[Outcome], end: float
             ) -> tuple[list[Series], list[Metric], dict[str, str]]:
    rtts = sorted(v for o in outcomes for s in o.series if s.name == "blip_rtt" for v in s.v)
    if not rtts:
        return [], [], {}
    mid = len(rtts) // 2
    median = rtts[mid] if len(rtts) % 2 else (rtts[mid - 1] + rtts[mid]) / 2
    return [], [Metric("blip_median", median, "ms")], {}


BLIP = Kind(
    name="blip", options=OPTIONS, expand=_expand, figures=_figures,
    headline=("blip_median", "blip_loss"), metrics=("blip_median", "blip_loss"),
    flow=FlowTool(tool="blipper", package="blipper", bulk=False, rtt=False,
                  media_type="text/plain", server=lambda _f, _i, _p: None, client=_client,
                  collect=_collect))

# ---------------------------------------------------------------------------------------


@pytest.fixture
def blip() -> Iterator[Kind]:
    metrics.register(*BLIP_METRICS)
    register(BLIP)
    yield BLIP
    unregister("blip")


EXPERIMENT = """lab = "lab.toml"
[[tests]]
name = "blips"
kind = "blip"
from = "client"
to = "server"
count = {count}
samplers = {{ kinds = [] }}
"""


def _load(tmp_path: Path, text: str) -> Test:
    (tmp_path / "lab.toml").write_text(chain3("kindseam", ipv6=False))
    (tmp_path / "exp.toml").write_text(text)
    (test,) = load_experiment(tmp_path / "exp.toml").variants[0].tests
    return test


def test_a_new_kind_runs_end_to_end_from_its_one_module(tmp_path: Path, blip: Kind) -> None:
    test = _load(tmp_path, EXPERIMENT.format(count=4))
    (flow,) = test.flows
    assert flow.options_as(BlipOptions) == BlipOptions(count=4)
    plan = plan_lab(replace(load_experiment(tmp_path / "exp.toml").variants[0].lab,
                            name="kindseam"))
    nodes = {n.name: FakeExecutor(n.name) for n in plan.nodes}
    nodes["client"].outputs["blipper"] = b"10.0\n30.0\nlost\n20.0\n"
    nodes["client"].runs_for = 0.2
    workdir = tmp_path / "work"
    workdir.mkdir()
    as_executors: dict[str, Executor] = dict(nodes)

    result = run_test(test, plan, workdir, nodes=as_executors)

    assert result.errors == []
    (client,) = nodes["client"].started
    assert client.argv == ["blipper", "-c", "4", str(plan.node("server").primary4)]
    assert nodes["server"].started == [] and nodes["r1"].started == []
    got = {(m.name, m.flow): m.value for m in result.metrics}
    # Its collector's figure per flow, its figures' for the run: 3 of 4 answered.
    assert got[("blip_loss", "blips")] == 25.0
    assert got[("blip_median", None)] == 20.0
    (rtt,) = [s for s in result.series if s.name == "blip_rtt"]
    assert rtt.v == [10.0, 30.0, 20.0]
    assert [r.name for r in result.raw] == ["blips blipper"]

    # Stored and read back as any run is, then summarised under the kind's headline.
    rec = RunRecord(experiment="e", test=test.name, kind=test.kind, repetition=1,
                    variant={}, labels={}, started_at=result.started_at,
                    duration_s=result.duration_s,
                    metadata={"test": {"flows": [f.as_record() for f in test.flows]}},
                    metrics=result.metrics, series=result.series, raw=result.raw)
    with open_store(str(tmp_path / "runs.db")) as store:
        back = store.get_run(store.save_run(rec))
    assert back.metric("blip_median") == 20.0
    assert back.metadata["test"]["flows"][0]["count"] == 4
    (row,) = summary_rows([back])
    assert row["figures"]["blip_median"]["median"] == 20.0


@pytest.mark.parametrize(("text", "line", "key", "message"), [
    (EXPERIMENT.format(count=1000), 7, "tests[0].count", "at most 100 blips, got 1000"),
    ('lab = "lab.toml"\n[[tests]]\nname = "mix"\nkind = "custom"\nfrom = "client"\n'
     'to = "server"\n[[tests.flows]]\nkind = "blip"\ncount = 0\n', 9,
     "tests[0].flows[0].count", "must be at least 1, got 0"),
])
def test_its_option_is_checked_at_load_naming_file_line_and_key(
        tmp_path: Path, blip: Kind, text: str, line: int, key: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        _load(tmp_path, text)
    assert (e.value.file, e.value.line, e.value.key, e.value.message) == (
        str(tmp_path / "exp.toml"), line, key, message)


def test_it_is_documented_from_its_declaration_and_known_to_custom(blip: Kind) -> None:
    assert option_table(blip).splitlines()[2:] == [
        "| `count` | 3 | blips to send (1-100) |",
        '| `duration` | `"1s"` | how long the test lasts |']
    # A custom test may have blip flows: its runs may carry the blip figures.
    assert {"blip_median", "blip_loss", "jain_index"} <= set(metrics_of("custom"))
