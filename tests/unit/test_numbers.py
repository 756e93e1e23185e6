"""Whole numbers a user writes (hoplab.numbers): what is accepted and how the rest is
refused, by the function and by the commands that read run ids and filters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.errors import UsageError
from hoplab.numbers import MAX_ID, run_id, whole
from hoplab.store import open_store
from tests.helpers.runs import make_run

HOPLAB = str(Path(sys.executable).with_name("hoplab"))


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("12", 12), (" 7 ", 7), ("0007", 7), (str(MAX_ID), MAX_ID),
    ("0" * 5000 + "3", 3),
])
def test_run_ids_accepted(text: str, value: int) -> None:
    assert run_id(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("²", r"expected a whole number \(digits 0-9\)"),      # isdigit() says yes
    ("٣", r"expected a whole number \(digits 0-9\)"),      # int() would read 3
    ("-1", "expected a whole number"), ("+1", "expected a whole number"),
    ("1_000", "expected a whole number"), ("", "expected a whole number"),
    ("1e3", "expected a whole number"),
    (str(MAX_ID + 1), f"at most {MAX_ID}"),
    ("9" * 5000, f"at most {MAX_ID}"),                    # int() raises past 4,300 digits
])
def test_run_ids_refused(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as err:
        run_id(text)
    assert len(str(err.value)) < 120                      # a long value is not echoed whole


def test_bounds_and_names() -> None:
    assert whole("3", "page", least=1, most=10) == 3
    with pytest.raises(UsageError, match=r"^page '0': at least 1$"):
        whole("0", "page", least=1)
    with pytest.raises(UsageError, match=r"^limit '11': at most 10$"):
        whole("11", "limit", most=10)
    with pytest.raises(UsageError, match=r"^page '9{20}'… \(5,000 characters\): at most 10$"):
        whole("9" * 5000, "page", most=10)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("numbers") / "runs.db"
    with open_store(str(path)) as store:
        store.save_run(make_run(goodput=1e6))
    return path


@pytest.mark.parametrize("argv", [
    ["show", "9223372036854775808"], ["show", "9" * 5000], ["show", "²"],
    ["export", "9223372036854775808"],
    ["runs", "--filter", "id=²"], ["runs", "--filter", "id=9223372036854775808"],
    ["runs", "--filter", "id=" + "9" * 5000],
    ["runs", *(a for i in range(40) for a in ("--filter", f"k{i}=v"))],
    ["compare", "1", "9" * 5000], ["plot", "²", "--kind", "box"],
])
def test_the_command_line_refuses_them_cleanly(db: Path, argv: list[str]) -> None:
    done = subprocess.run([HOPLAB, *argv, "--db", str(db)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "error" in done.stderr and len(done.stderr) < 2000
    assert done.stdout == ""


def test_a_run_id_is_still_found(db: Path) -> None:
    for argv in (["show", "1", "--json"], ["runs", "--filter", "id=1", "--json"]):
        done = subprocess.run([HOPLAB, *argv, "--db", str(db)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert '"id": 1' in done.stdout
