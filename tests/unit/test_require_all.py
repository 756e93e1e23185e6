"""HOPLAB_REQUIRE_ALL=1 (make test as root, .ci/run) turns a skip into a failure, except
the allow-listed skips about what the kernel lacks; without it a skip stays a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.require_all import ALLOWED_SKIPS, REQUIRE_ALL

REPO = Path(__file__).resolve().parents[2]

# Each way a test of ours skips: a marker, pytest.skip in a fixture (the PostgreSQL and
# Chromium fixtures), importorskip, a module-level skip, and an allowed kernel skip.
SKIPPING = '''
import pytest

@pytest.fixture
def server():
    pytest.skip("PostgreSQL server not installed")

@pytest.mark.skipif(True, reason="needs root")
def test_marked():
    pass

def test_fixture_skips(server):
    pass

def test_importorskip():
    pytest.importorskip("no_such_module_for_hoplab")

def test_kernel_lacks_it():
    pytest.skip("this kernel has no WireGuard module")

def test_passes():
    pass
'''

MODULE_SKIP = '''
import pytest

pytest.skip("chromium is missing", allow_module_level=True)

def test_never_runs():
    pass
'''


def _pytest(tmp_path: Path, require: str | None,
            source: str = SKIPPING) -> subprocess.CompletedProcess[str]:
    """pytest with our plugin on one test file, in a directory of its own."""
    (tmp_path / "test_skipping.py").write_text(source)
    (tmp_path / "test_passing.py").write_text("def test_passes():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_ALL}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if require is not None:
        env[REQUIRE_ALL] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.helpers.require_all", "-p",
         "no:cacheprovider", "-rA", "-q", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("require", [None, "0"])
def test_skips_stay_skips_by_default(tmp_path: Path, require: str | None) -> None:
    proc = _pytest(tmp_path, require)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed, 4 skipped" in proc.stdout, proc.stdout
    proc = _pytest(tmp_path, require, MODULE_SKIP)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout, proc.stdout


def _failed_for(reason: str) -> str:
    return f"skipped with {REQUIRE_ALL}=1 (this machine should run every test): {reason}"


def test_skips_fail_when_every_test_must_run(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "1")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    # The marker and the fixture skip in setup (errors), importorskip in the test (a
    # failure); the kernel's missing WireGuard module stays a skip.
    assert "1 failed, 2 passed, 1 skipped, 2 errors" in out, out
    for reason in ("needs root", "PostgreSQL server not installed",
                   "could not import 'no_such_module_for_hoplab'"):
        assert _failed_for(reason) in out, (reason, out)
    assert "SKIPPED [1] test_skipping.py:19: this kernel has no WireGuard module" in out, out


def test_a_module_skip_fails_collection(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "1", MODULE_SKIP)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert _failed_for("chromium is missing") in proc.stdout, proc.stdout


def test_allowed_skips_say_why() -> None:
    assert ALLOWED_SKIPS
    for reason, why in ALLOWED_SKIPS.items():
        assert "kernel" in reason or "kernel" in why
        assert len(why) > 40, reason
