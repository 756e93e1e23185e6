"""What `make test` (the README's test command, run by .ci/run) and `make check` run,
read from make's dry run: the whole suite and every check, and no root for check; and
what they type-check."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def dry_run(*args: str) -> str:
    make = shutil.which("make")
    assert make is not None, "make is not installed"
    proc = subprocess.run([make, "-n", "-C", str(REPO), *args], capture_output=True, text=True,
                          timeout=60, check=False,
                          env={k: v for k, v in os.environ.items()
                               if k not in ("HOPLAB_REQUIRE_ALL", "MAKEFLAGS")})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_make_test_runs_lint_types_wire_and_every_test() -> None:
    out = dry_run("test", "HOPLAB_REQUIRE_ALL=1")
    assert ".venv/bin/ruff check src tests bench" in out
    assert ".venv/bin/mypy\n" in out
    assert "cargo test --locked" in out and "cargo clippy" in out
    # pytest over all of tests/ (unit on both cores, then the rest two at a time, a file
    # to a worker, then those marked pairs two at a time, those marked alone one at a
    # time, and those marked machine last), where a skip fails.
    for line in _pytest_lines("1"):
        assert line in out, line
    # The static checks and the unit tests beside the pool, in the idle scheduling class,
    # each one's output together.
    assert "make --no-print-directory -j2 lab-pool beside-pool\n" in out
    assert re.search(r"^chrt --idle 0 \S*make --no-print-directory -O -j4 unit-xdist lint "
                     r"typecheck wire-test fold-test gen-test$", out, re.M), out


def test_make_test_as_root_requires_every_test() -> None:
    expected = "1" if os.geteuid() == 0 else "0"
    out = dry_run("test")
    for line in _pytest_lines(expected):
        assert line in out, line


def _pytest_lines(require: str) -> list[str]:
    env = f"HOPLAB_REQUIRE_ALL={require} .venv/bin/pytest -q"
    return [f"{env} -n 2 tests/unit\n",
            f"{env} -n 2 --dist loadfile --no-loadscope-reorder --durations=25 "
            '-m "not machine and not alone and not pairs" --ignore=tests/unit tests\n',
            f"{env} -n 2 --dist load --durations=5 -m pairs --ignore=tests/unit tests\n",
            f"{env} --durations=10 -m alone --ignore=tests/unit tests\n",
            f"{env} -m machine --ignore=tests/unit tests\n"]


def test_ci_runs_make_test_requiring_every_test() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "make setup\n" in ci and "make test HOPLAB_REQUIRE_ALL=1\n" in ci


def test_make_check_is_lint_types_and_unit_tests_without_root() -> None:
    out = dry_run("check")
    assert ".venv/bin/ruff check src tests bench" in out
    assert ".venv/bin/mypy\n" in out
    assert ".venv/bin/pytest -q tests/unit\n" in out
    for needs_root in ("apt-get", "sudo", "ip netns", "cargo", "HOPLAB_REQUIRE_ALL=1"):
        assert needs_root not in out, needs_root


def test_mypy_checks_tests_and_bench_relaxed_as_httpx_does() -> None:
    mypy = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    assert set(mypy["files"]) == {"src/hoplab", "tests", "bench"}
    (tests,) = [o for o in mypy["overrides"] if o["module"] == ["tests.*"]]
    assert tests == {"module": ["tests.*"], "disallow_untyped_defs": False,
                     "check_untyped_defs": True}


def test_every_test_is_in_one_phase_of_make_test() -> None:
    # A test marked for two phases would run in both (-m alone and -m pairs each select
    # it); one marked for none runs in the pool.
    both = "(alone and pairs) or (alone and machine) or (pairs and machine)"
    done = subprocess.run([str(REPO / ".venv" / "bin" / "pytest"), "--collect-only", "-q",
                           "-p", "no:randomly", "-m", both, "--ignore=tests/unit", "tests"],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert "no tests collected" in done.stdout or " 0 selected" in done.stdout, done.stdout[-2000:]
    assert "error" not in done.stdout.lower(), done.stdout[-2000:]
