"""`hoplab schedule add`'s bad input: exit 2 naming the option, the file, line and key,
or PostgreSQL, before anything is stored (no store is reached: the URL's port is
closed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.cli.main import main

NOWHERE = "postgresql://hoplab@127.0.0.1:1/none"


def _add(path: Path, *more: str, db: str = NOWHERE) -> list[str]:
    return ["schedule", "add", "nightly", str(path), "--db", db, "--cron", "0 2 * * *", *more]


@pytest.mark.parametrize(("option", "value", "named"), [
    ("--cron", "0 2 * *", "--cron '0 2 * *': not a cron expression of 5 fields"),
    ("--cron", "61 2 * * *", "--cron '61 2 * * *': not a cron expression"),
    ("--cron", "0 0 31 2 *", "--cron '0 0 31 2 *': never fires"),
    ("--cron", "0 0 30 2 *", "--cron '0 0 30 2 *': never fires"),
    ("--tz", "Mars/Olympus", "--tz 'Mars/Olympus': no such time zone"),
    ("--alert", "ftp://hooks.example/services/T0/s3cr3t", "--alert ftp://hooks.example/…"),
    ("--where", "device", "--where 'device': no '='"),
    ("--alert", "http://169.254.169.254/latest/meta-data/s3cr3t",
     "--alert http://169.254.169.254/…: its host is, or resolves to, a link-local or "
     "metadata address"),
    ("--alert", "http://[fd00:ec2::254]/s3cr3t", "--alert http://fd00:ec2::254/…: its host"),
])
def test_bad_option_exits_2_naming_it(tmp_path, capsys, option, value, named):
    exp = tmp_path / "wan.toml"
    exp.write_text('lab = "chain.toml"\n')
    argv = [a for a in _add(exp) if a not in ("--cron", "0 2 * * *")] + [option, value]
    if option != "--cron":
        argv += ["--cron", "0 2 * * *"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "s3cr3t" not in err


def test_bad_experiment_names_file_line_and_key(tmp_path, capsys):
    exp = tmp_path / "wan.toml"
    exp.write_text('lab = "chain.toml"\nrepeat = "three"\n')
    (tmp_path / "chain.toml").write_text(
        (Path(__file__).resolve().parents[2] / "examples" / "chain.toml").read_text())
    assert main(_add(exp)) == 2
    assert f"{exp}:2: repeat:" in capsys.readouterr().err


def test_sqlite_store_is_refused_naming_postgresql(tmp_path, capsys):
    assert main(_add(tmp_path / "wan.toml", db=str(tmp_path / "runs.db"))) == 2
    err = capsys.readouterr().err
    assert "PostgreSQL" in err and "docs/fleet.md" in err
    assert not (tmp_path / "runs.db").exists()


def test_unreadable_alert_file_exits_2_naming_it(tmp_path, capsys):
    exp = tmp_path / "wan.toml"
    (tmp_path / "hook").write_text("\n")
    assert main(_add(exp, "--alert-file", str(tmp_path / "none"))) == 2
    assert main(_add(exp, "--alert-file", str(tmp_path / "hook"))) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"hoplab: error: --alert-file {tmp_path / 'none'}: cannot read it "
                   "(FileNotFoundError)",
                   f"hoplab: error: --alert-file {tmp_path / 'hook'}: its first line is empty"]
