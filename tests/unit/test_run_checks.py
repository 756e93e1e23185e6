"""Refusals before anything runs: a missing tool names its Debian package."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hoplab.errors import CapabilityError, UsageError
from hoplab.lab.caps import Capabilities
from hoplab.run.experiment import check_machine, schedule
from hoplab.spec.experiment_loader import load_experiment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_missing_irtt_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = load_experiment(EXAMPLES / "quickstart.toml")
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "irtt" else real(tool))
    with pytest.raises(CapabilityError, match="apt-get install irtt") as exc:
        check_machine(exp, Capabilities(kernel="test"))
    assert isinstance(exc.value, UsageError) and exc.value.exit_code == 2


def test_order_is_seeded_and_covers_every_run() -> None:
    exp = load_experiment(EXAMPLES / "quickstart.toml", ["seed=5"])
    first, again = schedule(exp), schedule(exp)
    assert first == again
    assert len(first) == 24 == len(set(first))
    other = schedule(load_experiment(EXAMPLES / "quickstart.toml", ["seed=6"]))
    assert other != first and sorted(other, key=str) == sorted(first, key=str)
    unshuffled = schedule(load_experiment(EXAMPLES / "quickstart.toml", ["shuffle=false"]))
    assert [(j.variant, j.test) for j in unshuffled[:4]] == [(0, 0)] * 4
