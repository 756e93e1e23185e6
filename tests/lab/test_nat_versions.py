"""examples/nat-versions (seed 002), run as docs/versions.md tells a user to: the
versions as a matrix, then make-repo.sh and `hoplab bisect run` over the commits."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.lab import hoplab

pytestmark = pytest.mark.root

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nat-versions"


def test_the_versions_run_and_bisect_names_v5(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    # Every version once, 1 s each: each variant's lab, sysctl and RPS setup works, and
    # the rate halves at v5 (TCP payload of 51 Mbit/s of 1514-byte frames: 48.8).
    proc = hoplab("run", str(EXAMPLE / "versions.toml"), "--set", "duration=1s",
                  "--repeat", "1", "--db", str(db), "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    goodput = {r["variant"]["version"]: r["metrics"]["goodput"] / 1e6 for r in runs}
    assert all(r["status"] == "ok" for r in runs), runs
    for v in ("v1", "v2", "v3", "v4"):
        assert goodput[v] == pytest.approx(100 * 1448 / 1514, rel=0.03), goodput
    for v in ("v5", "v6"):
        assert goodput[v] == pytest.approx(51 * 1448 / 1514, rel=0.03), goodput

    # The history, with 1 s tests to keep the test short (the example's are 3 s).
    copy = tmp_path / "example"
    copy.mkdir()
    (copy / "lab.toml").write_text((EXAMPLE / "lab.toml").read_text())
    text = (EXAMPLE / "versions.toml").read_text()
    assert 'duration = "3s"' in text
    (copy / "versions.toml").write_text(text.replace('duration = "3s"', 'duration = "1s"'))
    repo = tmp_path / "fw"
    made = subprocess.run([str(EXAMPLE / "make-repo.sh"), str(repo),
                           str(copy / "versions.toml")], capture_output=True, text=True,
                          check=False)
    assert made.returncode == 0, made.stderr
    assert len(made.stdout.splitlines()) == 6
    proc = hoplab("bisect", "run", "bisect.toml", "--repo", str(repo), "--good", "v1",
                  "--bad", "v6", "--db", str(db), "--max-repeat", "10", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = re.search(r"first bad commit: \w+ (v\d): ", proc.stdout)
    assert first and first.group(1) == "v5", proc.stdout
    assert not (repo / ".git" / "BISECT_START").exists()

    # Every step between v1 and v6: the one at v5, from runs mostly stored already.
    proc = hoplab("bisect", "run", "bisect.toml", "--repo", str(repo), "--good", "v1",
                  "--bad", "v6", "--db", str(db), "--max-repeat", "10", "--all", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = re.findall(r"^step at \w+ (v\d): .*, ([+-][\d.]+) %", proc.stdout, re.M)
    assert [v for v, _ in steps] == ["v5"], proc.stdout
    assert float(steps[0][1]) == pytest.approx(100 * (51 / 100 - 1), abs=2.5)
    assert "1 step between" in proc.stdout
