"""tests/helpers/steal.py: a test that failed while the hypervisor took the CPU runs again,
at most twice, with a warning each time; a failure on a quiet machine stands at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hoplab.kinds import stolen_cpu as steal_sampler
from tests.helpers import steal

REPO = Path(__file__).resolve().parents[2]

# The plugin reads a /proc/stat of the test's own making: a test "steals" 100 s (at
# any clock tick rate, a share of a core far over the threshold) by raising it.
INNER = '''
import json
import os
from pathlib import Path

import tests.helpers.steal as steal

HERE = Path(__file__).parent
steal._STAT = HERE / "stat"
(HERE / "stat").write_text("cpu  1 0 1 100 0 0 0 0 0 0\\n")


def _steal():
    taken = round((steal.stolen_s() + 100) * os.sysconf("SC_CLK_TCK"))
    (HERE / "stat").write_text(f"cpu  1 0 1 100 0 0 0 {taken} 0 0\\n")


def _try(name):
    tries = HERE / "tries.json"
    n = json.loads(tries.read_text()) if tries.exists() else {}
    n[name] = n.get(name, 0) + 1
    tries.write_text(json.dumps(n))
    return n[name]


def test_stolen_once_then_passes():
    if _try("once") == 1:
        _steal()
        assert False, "off its bound"


def test_a_quiet_failure_stands():
    _try("quiet")
    assert False, "off its bound"


def test_stolen_every_time():
    _try("always")
    _steal()
    assert False, "off its bound"
'''


def test_reruns_only_what_failed_while_cpu_was_stolen(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.helpers.steal",
                           "-p", "no:cacheprovider", "-q", str(tmp_path)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "2 failed, 1 passed, 3 warnings" in out, out
    tries = (tmp_path / "tries.json").read_text()
    assert tries == '{"once": 2, "quiet": 1, "always": 3}', tries
    assert out.count("test_stolen_every_time failed while the hypervisor took") == 2, out
    assert out.count("test_stolen_once_then_passes failed while the hypervisor took") == 1
    assert "run again (2 of 2)" in out


def test_steal_is_read_from_the_cpu_line() -> None:
    line = "cpu  269299 3927 79240 297189 5198 0 18412 11742 0 0\ncpu0 1 2 3\n"
    assert steal.stolen_s(line) == 11742 / os.sysconf("SC_CLK_TCK")
    assert steal.stolen_s("cpu  1 2 3 4\n") == 0.0      # a kernel that does not count it
    assert steal_sampler.share(0.5, 10.0) == 0.05 and steal_sampler.share(1.0, 0.0) == 0.0


def test_the_worst_second_is_read_from_samples_a_second_apart() -> None:
    # Samples every 0.25 s; 0.3 s stolen between 1.0 and 1.25 s, nothing else.
    samples = [(0.25 * i, 0.0 if i <= 4 else 0.3) for i in range(12)]
    assert steal.peak(samples) == 0.3
    assert steal.peak([(0.0, 0.0), (0.5, 1.0)]) == 0.0     # no second between samples
    assert steal.peak([(0.25 * i, 0.01 * i) for i in range(9)]) == pytest.approx(0.04)


def test_a_rerun_waits_for_a_quiet_second(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 0 1 100 0 0 0 500 0 0\n")
    monkeypatch.setattr(steal, "_STAT", stat)
    waited = steal.wait_quiet(limit_s=10)
    assert waited is not None and 1.0 <= waited < 10

    # Half a core stolen all the while: no quiet second within the limit.
    real = steal.stolen_s

    def busy(text: str | None = None) -> float:
        return real(text) + 0.5 * time.monotonic()
    monkeypatch.setattr(steal, "stolen_s", busy)
    assert steal.wait_quiet(limit_s=2) is None
