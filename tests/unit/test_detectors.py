"""Change-point detectors behind a registry (issue 17): a detector is one module and one
register() line, `hoplab trend --detector NAME` picks one, and ruptures is imported only
when one of its detectors runs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from hoplab.analysis import detectors
from hoplab.analysis.changepoints import detect
from hoplab.analysis.detectors import Detector
from hoplab.analysis.detectors.edivisive import locate as edivisive
from hoplab.analysis.series_trend import TrendPoint
from hoplab.analysis.trend import analyse
from hoplab.cli.main import main
from hoplab.errors import UsageError
from tests.unit.test_cli_trend import VERSIONS, _fill


def _steepest(values: Sequence[Sequence[float]], min_size: int) -> list[int]:
    """A toy: one change point, where the medians of neighbouring values differ most."""
    medians = [float(np.median(v)) for v in values]
    cuts = range(min_size, len(values) - min_size + 1)
    return [max(cuts, key=lambda i: abs(medians[i] - medians[i - 1]))] if cuts else []


@pytest.fixture
def toy() -> Iterator[str]:
    detectors.register(Detector("steepest", "the largest jump between two medians",
                                _steepest))
    yield "steepest"
    detectors.unregister("steepest")


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    _fill(path, VERSIONS)                   # v1.16 on: 20 % lower, 5 % noise
    return path


def _points(levels: Sequence[float]) -> list[TrendPoint]:
    rng = np.random.default_rng(2)
    return [TrendPoint(value=f"v{i}", runs=(3 * i, 3 * i + 1, 3 * i + 2),
                       values=tuple(rng.normal(x, x * 0.02, 3)), started_at=float(i),
                       tests=frozenset({"wan/bulk"})) for i, x in enumerate(levels)]


def test_a_toy_detector_is_one_function_and_one_registry_call(
        toy: str, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    found = analyse("goodput", "version", _points([100.0] * 7 + [130.0] * 5), detector=toy)
    (change,) = found.changes
    assert (change.before, change.after) == ("v6", "v7")
    assert change.point.change_pct == pytest.approx(30, abs=3)
    # It decides by no test at a level, so it has no power figures, and says why.
    assert found.detection.power is None and found.detection.detector == toy
    assert found.detection.reason == ("the steepest detector decides by a penalty, not by a "
                                      "test at a level, so it gives no power figures")

    assert main(["trend", "goodput", "--db", db, "--filter", "test=bulk",
                 "--detector", toy, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["detector"] == toy and doc["power"] is None
    assert [(c["before"], c["after"]) for c in doc["change_points"]] == [("v1.15", "v1.16")]
    assert main(["trend", "goodput", "--db", db, "--filter", "test=bulk",
                 "--detector", toy]) == 0
    text = capsys.readouterr().out
    assert ", detector steepest;" in text and "v1.15 -> v1.16" in text
    assert "no power figures: the steepest detector decides by a penalty" in text


def test_a_name_is_registered_once_and_an_unknown_one_is_bad_input(
        toy: str, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="'steepest' is registered already"):
        detectors.register(Detector(toy, "again", _steepest))
    assert detectors.names() == ["edivisive", "pelt", "binseg", "steepest"]
    with pytest.raises(UsageError, match="choose one of edivisive, pelt, binseg, steepest"):
        detect([[1.0]] * 6, detector="nope")
    assert main(["trend", "goodput", "--db", db, "--detector", "nope"]) == 2
    assert "no change-point detector 'nope'" in capsys.readouterr().err


def test_the_detector_help_lists_the_registry(
        toy: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`trend --help` names every registered detector, a plug-in's too, with its line."""
    with pytest.raises(SystemExit):
        main(["trend", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "edivisive (the default): E-divisive means" in text
    assert "pelt: ruptures' PELT" in text and "binseg: ruptures' binary segmentation" in text
    assert "steepest: the largest jump between two medians" in text


@pytest.mark.parametrize("name", ["pelt", "binseg"])
def test_ruptures_detectors_find_the_step(name: str, db: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trend", "goodput", "--db", db, "--filter", "test=bulk",
                 "--detector", name, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(c["before"], c["after"]) for c in doc["change_points"]] == [("v1.15", "v1.16")]
    (cp,) = doc["change_points"]
    assert cp["change_pct"] == pytest.approx(-20, abs=2.5) and cp["p"] < 1e-6
    # Each change point's figures are measured as for any detector; a penalty has no
    # level, so no detectable step.
    assert cp["detectable_pct"] is None and doc["power"] is None
    assert doc["reason"].startswith(f"the {name} detector decides by a penalty")


@pytest.mark.parametrize("name", ["pelt", "binseg"])
def test_ruptures_detectors_on_constant_and_uneven_values(name: str) -> None:
    # No noise: nothing but the step is a change point (a zero penalty would split
    # anywhere); uneven repetitions: change points still fall between values.
    flat = [[5.0, 5.0, 5.0]] * 6 + [[7.0, 7.0, 7.0]] * 6
    assert detect(flat, detector=name).change_points[0].index == 6
    assert [cp.index for cp in detect([[5.0, 5.0]] * 12, detector=name).change_points] == []
    rng = np.random.default_rng(6)
    uneven = [list(rng.normal(100 if i < 30 else 80, 4, 1 + i % 4)) for i in range(60)]
    cuts = [cp.index for cp in detect(uneven, detector=name).change_points]
    # PELT takes more false steps than edivisive (docs/trend.md), here too.
    assert 30 in cuts and all(b - a >= 2 for a, b in zip([0, *cuts], [*cuts, 60], strict=True))
    assert edivisive(uneven) == [30]


def test_ruptures_is_imported_only_when_its_detectors_run(db: str) -> None:
    code = ("import sys\nfrom hoplab.cli.main import main\n"
            f"main(['trend', 'goodput', '--db', {db!r}, '--filter', 'test=bulk', "
            "'--detector', sys.argv[1]])\nprint('ruptures' in sys.modules, file=sys.stderr)")
    for name, imported in (("edivisive", "False"), ("pelt", "True")):
        proc = subprocess.run([sys.executable, "-c", code, name], capture_output=True,
                              text=True, check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == imported
