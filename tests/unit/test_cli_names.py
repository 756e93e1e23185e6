"""Lab and node names given on the command line follow the rules of names in lab files."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from hoplab.cli import lab as lab_cli
from hoplab.cli import run as run_cli
from hoplab.errors import SpecError, UsageError
from hoplab.spec import load_lab_text
from hoplab.spec.names import lab_name, node_name

BAD_LABS = ["../../tmp/x", "Lab", "a b", "", "-x", "a" * 21, "x/y", "x.json"]
BAD_NODES = ["../r1", "1r", "r 1", "", "r" * 32]


@pytest.mark.parametrize("name", BAD_LABS)
def test_lab_down_refuses_a_bad_name(name: str) -> None:
    with pytest.raises(UsageError, match=r"lab down NAME: invalid lab name"):
        lab_cli.run_down(argparse.Namespace(lab=name))


@pytest.mark.parametrize("name", BAD_LABS)
def test_lab_exec_refuses_a_bad_lab_name(name: str) -> None:
    with pytest.raises(UsageError, match=r"lab exec LAB: invalid lab name"):
        lab_cli.run_exec(argparse.Namespace(lab=name, node="r1", cmd=["--", "true"]))


@pytest.mark.parametrize("name", BAD_NODES)
def test_lab_exec_refuses_a_bad_node_name(name: str) -> None:
    with pytest.raises(UsageError, match=r"lab exec LAB NODE: invalid node name"):
        lab_cli.run_exec(argparse.Namespace(lab="ok", node=name, cmd=["--", "true"]))


@pytest.mark.parametrize("name", BAD_LABS)
def test_lab_up_name_refused_before_the_file_is_read(name: str) -> None:
    with pytest.raises(UsageError, match=r"lab up --name: invalid lab name"):
        lab_cli.run_up(argparse.Namespace(file="/nonexistent.toml", name=name, json=True))


@pytest.mark.parametrize("name", BAD_LABS)
def test_run_lab_name_refused_before_the_file_is_read(name: str) -> None:
    args = argparse.Namespace(lab_name=name, experiment="/nonexistent.toml", sets=[],
                              repeat=None, json=True)
    with pytest.raises(UsageError, match=r"run --lab-name: invalid lab name"):
        run_cli.run(args)


@pytest.mark.parametrize("name", BAD_LABS)
def test_the_file_rule_is_the_same_rule(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as rule:
        lab_name(name)
    with pytest.raises(SpecError) as in_file:
        load_lab_text(f'name = "{name}"\n[nodes.a]\n', "lab.toml")
    assert str(rule.value) in in_file.value.message


def test_good_names_pass() -> None:
    assert lab_name("t0a1-b_c") == "t0a1-b_c"
    assert node_name("Edge-2_x") == "Edge-2_x"
