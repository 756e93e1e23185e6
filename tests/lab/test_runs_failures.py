"""A run that fails in an unexpected way is stored as failed, with its error, and the
experiment goes on: no traceback ends it, nothing is left up."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hoplab.lab import ready as ready_mod
from hoplab.run.experiment import ExperimentRunner
from hoplab.spec.experiment import Experiment
from hoplab.spec.experiment_loader import load_experiment
from hoplab.store import open_store
from tests.helpers.lab import hoplab, lab_namespaces, new_lab_name
from tests.helpers.lab_text import chain3
from tests.helpers.sink import Sink

pytestmark = [pytest.mark.root, pytest.mark.slow]

LAB = chain3("f", ipv6=False)

# Named variants, run in file order: each failure is of another kind, the last one works.
EXPERIMENT = """
lab = "lab.toml"
seed = 1
shuffle = false
pause = "0s"
[matrix.mode.hangs]
"setup.r1" = [["sleep", "30"]]
[matrix.mode.not-executable]
"setup.r1" = [["{here}/lab.toml"]]
[matrix.mode.fine]
[[tests]]
name = "ping"
kind = "ping"
from = "client"
to = "server"
duration = "1s"
"""


def write(tmp_path: Path) -> Path:
    (tmp_path / "lab.toml").write_text(LAB)
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT.replace("{here}", str(tmp_path)))
    return exp


def with_ipv6_flow(exp: Experiment, variant: int) -> Experiment:
    """A configuration the loader now refuses (family = 6 in a lab without IPv6), made
    by hand: the runner must still store the run as failed if one reaches it."""
    v = exp.variants[variant]
    test = v.tests[0]
    bad = dataclasses.replace(test, flows=tuple(dataclasses.replace(f, family=6)
                                                for f in test.flows))
    variants = list(exp.variants)
    variants[variant] = dataclasses.replace(v, tests=(bad,))
    return dataclasses.replace(exp, variants=tuple(variants))


def test_each_kind_of_failure_is_stored_and_the_next_run_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ready_mod, "SETUP_TIMEOUT_S", 1.0)
    (tmp_path / "lab.toml").write_text(LAB)
    exp = load_experiment(write(tmp_path))
    # The "fine" variant twice: once with a flow no address exists for (a ValueError
    # deep in the runner), once as written.
    exp = dataclasses.replace(exp, variants=(*exp.variants, exp.variants[2]))
    exp = with_ipv6_flow(exp, 2)
    name = new_lab_name()
    sink = Sink()
    records = ExperimentRunner(exp, sink, lab_name=name).run()
    assert lab_namespaces(name) == set()
    assert records == sink.saved
    assert [r.variant["mode"] for r in records] == ["hangs", "not-executable", "fine", "fine"]
    hangs, not_exec, ipv6, fine = records
    assert hangs.status == "failed" and hangs.error is not None
    assert "setup.r1: sleep 30 did not finish in 1 s" in hangs.error
    assert not_exec.status == "failed" and not_exec.error is not None
    assert "setup.r1: cannot run" in not_exec.error and "Permission denied" in not_exec.error
    assert ipv6.status == "failed" and ipv6.error is not None
    assert ipv6.error.startswith("ValueError: node server has no IPv6 address")
    assert "Traceback" in ipv6.metadata["traceback"]
    assert fine.status == "ok", fine.error
    assert fine.metric("rtt_mean") is not None or fine.metrics


def test_through_the_command_line_failed_runs_are_stored(tmp_path: Path) -> None:
    exp = write(tmp_path)
    text = exp.read_text().replace('"setup.r1" = [["sleep", "30"]]\n', "")
    exp.write_text(text)
    db = tmp_path / "runs.db"
    name = new_lab_name()
    proc = hoplab("run", str(exp), "--db", str(db), "--json", "--lab-name", name, timeout=300)
    assert lab_namespaces(name) == set()
    assert proc.returncode == 1, proc.stderr  # a run failed; the experiment finished
    assert "Traceback" not in proc.stderr
    out = json.loads(proc.stdout)
    assert [(r["variant"]["mode"], r["status"]) for r in out["runs"]] == [
        ("hangs", "ok"), ("not-executable", "failed"), ("fine", "ok")]
    with open_store(str(db)) as store:
        assert [r.status for r in store.list_runs()] == ["ok", "failed", "ok"]


def test_a_fault_in_a_parser_or_a_figure_keeps_what_was_measured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing measured is lost: a bug in a parser, in the figures or in the metric names
    fails the run, which is stored with its raw outputs (to be parsed again once fixed)."""
    from hoplab import kind_registry as registry
    from hoplab.kinds import figures as figures_mod
    from hoplab.record import Metric
    from hoplab.run import execute

    exp = load_experiment(write(tmp_path))
    fine = exp.variants[2]
    exp = dataclasses.replace(exp, variants=(fine, fine, fine, fine))
    calls = {"n": 0}
    real_figures, real_tool = figures_mod.run_figures, registry.flow_tool

    def figures(*args: object, **kw: object) -> object:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ZeroDivisionError("figure bug")
        result = real_figures(*args, **kw)  # type: ignore[arg-type]
        if calls["n"] == 3:  # two metrics of one name, flow, node and key
            result[1].extend([Metric("loss", 0.0, "%"), Metric("loss", 0.0, "%")])
        return result

    def tool(kind: str) -> object:
        t = real_tool(kind)
        if calls["n"] == 0:  # the first run's parser fails (figures not yet called)

            def broken(*_a: object) -> None:
                raise IndexError("parser bug")
            return dataclasses.replace(t, collect=broken)
        return t

    monkeypatch.setattr(execute, "run_figures", figures)
    monkeypatch.setattr("hoplab.run.outcome.flow_tool", tool)
    name = new_lab_name()
    records = ExperimentRunner(exp, Sink(), lab_name=name).run()
    assert lab_namespaces(name) == set()
    parser, figure, twice, ok = records
    for r, why in ((parser, "IndexError: parser bug"), (figure, "ZeroDivisionError: figure bug"),
                   (twice, "two metrics with the same name")):
        assert r.status == "failed" and r.error is not None and why in r.error, r.error
        assert "raw outputs are kept" in r.error
        ping_raw = [x for x in r.raw if x.name.endswith(" ping")]
        assert ping_raw and b"icmp_seq=" in ping_raw[0].data
    assert ok.status == "ok", ok.error
