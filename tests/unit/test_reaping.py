"""tests/helpers/reaping.py: a test that leaves a process running, or exited and not
reaped, fails itself; the process is killed and reaped, and the next test is not touched."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.lab import live_pids

REPO = Path(__file__).resolve().parents[2]

LEAKY = '''
import subprocess
import time
from pathlib import Path

kept = []


def test_leaves_one_running():
    proc = subprocess.Popen(["sleep", "3141"])
    kept.append(proc)
    # Popen returns as the exec begins; the command line is there once it is done.
    while Path(f"/proc/{proc.pid}/cmdline").read_bytes() != b"sleep\\x003141\\x00":
        time.sleep(0.01)


def test_leaves_one_unreaped():
    proc = subprocess.Popen(["true"])
    kept.append(proc)
    while Path(f"/proc/{proc.pid}/stat").read_text().split(") ")[1][0] != "Z":
        time.sleep(0.01)


def test_stops_and_reaps_what_it_starts():
    proc = subprocess.Popen(["sleep", "3141"])
    proc.kill()
    proc.wait()


def test_after_them():
    assert all(p.poll() is not None for p in kept)
'''


def test_a_leak_fails_the_test_that_leaks(tmp_path: Path) -> None:
    (tmp_path / "test_leaky.py").write_text(LEAKY)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.helpers.reaping", "-p",
         "no:cacheprovider", "-rA", "-q", str(tmp_path)],
        cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout
    assert "4 passed, 2 errors" in out, out
    assert re.search(r"ERROR at teardown of test_leaves_one_running _+\n"
                     r"left running or unreaped: pid \d+: sleep 3141\n", out), out
    assert re.search(r"ERROR at teardown of test_leaves_one_unreaped _+\n"
                     r"left running or unreaped: pid \d+: \(exited, unreaped: true\)\n", out), out
    assert "ResourceWarning" not in out
    assert not any(Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x003141\x00"
                   for pid in live_pids("sleep"))
