"""The run commands' errors and store selection, without building anything."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hoplab.cli.main import main
from hoplab.store import open_store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_bad_experiment_exits_2_naming_file_line_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(f'lab = "{EXAMPLES}/chain.toml"\n[[tests]]\nname = "t"\nkind = "tcp"\n'
                   'from = "client"\nto = "server"\nduration = "ten seconds"\n')
    if os.geteuid() != 0:
        pytest.skip("hoplab run needs root before it reads the file")
    assert main(["run", str(exp), "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert f"{exp}:7: tests[0].duration:" in err
    assert not (tmp_path / "x.db").exists(), "nothing may be stored for a refused file"


def test_runs_reads_hoplab_db_from_the_environment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "team.db"
    open_store(str(db)).close()
    monkeypatch.setenv("HOPLAB_DB", str(db))
    assert main(["runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_show_of_an_unknown_run_is_a_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    open_store(str(tmp_path / "x.db")).close()
    assert main(["show", "42", "--db", str(tmp_path / "x.db")]) == 2
    assert "no run 42" in capsys.readouterr().err


def test_unreachable_postgresql_is_named_without_its_password(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["runs", "--db", "postgresql://me:secret@127.0.0.1:1/none"])
    err = capsys.readouterr().err
    assert code == 2 and "secret" not in err and "127.0.0.1:1" in err


def test_bad_filter_is_a_usage_error(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--db", str(tmp_path / "x.db"), "--filter", "hops"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_runs_shows_each_runs_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/fleet.md: "each run labelled bench=one or bench=two" (issue 27: no column).
    from tests.helpers.runs import make_run

    db = tmp_path / "team.db"
    with open_store(str(db)) as store:
        store.save_run(make_run(labels={"bench": "one", "device": "erx"}, goodput=9e7))
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["runs", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "labels" in out and "bench=one device=erx" in out
