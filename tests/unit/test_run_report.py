"""`report = true` (cli/run_report.py): the experiment key, and how the runs of one
`hoplab run` are split into the two sides it compares."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.cli.run_report import _slug, sides
from hoplab.errors import SpecError
from hoplab.record import RunRecord, Status
from hoplab.spec.experiment_loader import load_experiment
from tests.unit.test_experiment_loader import error, write

TEST = '[[tests]]\nname = "t"\nkind = "tcp"\nfrom = "client"\nto = "server"\n'
KERNEL = "lab.nodes.r1.vm.kernel"


def test_report_is_a_boolean_off_by_default(tmp_path: Path) -> None:
    assert load_experiment(write(tmp_path, TEST)).report is False
    assert load_experiment(write(tmp_path, "report = true\n" + TEST)).report is True
    assert load_experiment(write(tmp_path, TEST), ["report=true"]).report is True
    e = error(tmp_path, 'report = "yes"\n' + TEST)
    assert "report" in str(e) and e.line == 2, str(e)


def _run(run_id: int, kernel: str, status: Status = "ok") -> RunRecord:
    return RunRecord(experiment="k", test="t", kind="tcp", variant={KERNEL: kernel}, labels={},
                     repetition=1, status=status, started_at=0.0, id=run_id)


def test_sides_are_each_variants_ok_runs_in_run_order() -> None:
    runs = [_run(1, "debian:6.12"), _run(2, "debian:6.1"), _run(3, "debian:6.1", "failed"),
            _run(4, "debian:6.12"), _run(5, "debian:6.1")]
    assert sides(runs) == [(f"{KERNEL}=debian:6.12", [1, 4]), (f"{KERNEL}=debian:6.1", [2, 5])]
    # The matrix's order, whatever order the runs were shuffled into.
    assert sides(runs, [f"{KERNEL}=debian:6.1", f"{KERNEL}=debian:6.12"]) == [
        (f"{KERNEL}=debian:6.1", [2, 5]), (f"{KERNEL}=debian:6.12", [1, 4])]
    # File names from the values only.
    assert _slug(f"{KERNEL}=debian:6.12.100+deb12-amd64") == "debian_6.12.100+deb12-amd64"


def test_a_bad_report_value_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="report"):
        load_experiment(write(tmp_path, "report = 3\n" + TEST))
