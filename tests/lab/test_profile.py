"""Profiles with known answers: a process burning CPU 3:1 in two named functions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hoplab.profile import analyze, fold
from hoplab.profile.record import Recording, script
from hoplab.profile.tools import find
from hoplab.store import open_store
from tests.helpers.lab import HOPLAB, new_lab_name

DATA = Path(__file__).resolve().parents[1] / "data" / "profile"
REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(find("perf") is None or find("hoplab-fold") is None
                       or find("inferno-flamegraph") is None
                       or shutil.which("gcc") is None,
                       reason="needs perf, hoplab-fold and inferno (make setup) and gcc"),
]


@pytest.fixture(scope="module")
def burner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("burner") / "burner"
    subprocess.run(["gcc", "-O1", "-fno-omit-frame-pointer", "-o", str(exe),
                    str(DATA / "burner.c")], check=True)
    return exe


def test_known_split_shows_in_folded_stacks_and_top_table(burner: Path, tmp_path: Path) -> None:
    # 997 Hz, a prime, so that sampling cannot lock onto any period of the loop.
    rec = Recording(tmp_path / "perf.data", 997)
    rec.start()
    try:
        proc = subprocess.run([str(burner), "2"], check=True)
        assert proc.returncode == 0
    finally:
        rec.stop()
    assert rec.failure() is None
    text = script(rec.data)
    folded = fold.collapse(text, ("all", "pid"))
    stacks = fold.parse(folded)
    mine = fold.without_pids(_of_process(stacks, "burner"))
    total = analyze.samples(mine)
    assert total > 500, f"only {total} samples of a 2 s busy loop at 999 Hz"
    top = dict(analyze.top_symbols(mine, 5))
    three, one = top.get("hoplab_burn_three", 0.0), top.get("hoplab_burn_one", 0.0)
    # The two loops take nearly all of the process's samples (the rest: interrupts and
    # switches, more on a busy machine), split 3:1 between them.
    assert three + one >= 85, top
    assert 0.70 <= three / (three + one) <= 0.80, top
    # Folded lines keep stackcollapse-perf.pl's shape: the process name first, then
    # frames root to leaf, separated by ';', then the count.
    line = next(s for s in mine if s.endswith("hoplab_burn_three"))
    assert line.startswith("burner;") and "__libc_start" in line


def _of_process(stacks: Counter[str], comm: str) -> Counter[str]:
    return Counter({s: c for s, c in stacks.items()
                    if s.split(";", 1)[0].startswith(comm + "-")})


def test_hoplab_fold_matches_the_library_and_its_options(burner: Path, tmp_path: Path) -> None:
    rec = Recording(tmp_path / "perf.data", 499)
    rec.start()
    try:
        subprocess.run([str(burner), "0.5"], check=True)
        # Kernel frames for --kernel to mark: an idle CPU may give no samples at all
        # (seen: one kernel frame in 0.5 s), so copy zeros, which is kernel time.
        subprocess.run(["dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=2000"],
                       check=True, capture_output=True)
    finally:
        rec.stop()
    out = tmp_path / "script.txt"
    out.write_text(script(rec.data))
    plain = subprocess.run([*HOPLAB, "fold", str(out)], capture_output=True, text=True,
                           check=True).stdout
    with_pid = subprocess.run([*HOPLAB, "fold", "--pid", "--kernel", str(out)],
                              capture_output=True, text=True, check=True).stdout
    assert fold.parse(plain) and fold.parse(with_pid)
    assert not any(s.endswith("_[k]") for s in fold.parse(plain))
    assert any("_[k]" in s for s in fold.parse(with_pid))
    assert any(fold.pid_of(s.split(";")[0]) for s in fold.parse(with_pid))
    assert analyze.samples(fold.parse(plain)) == analyze.samples(fold.parse(with_pid))


def _run(tmp_path: Path, db: Path, *extra: str, env: dict[str, str] | None = None
         ) -> dict[str, Any]:
    exp = tmp_path / "exp.toml"
    exp.write_text(f'lab = "{REPO}/examples/mesh-chain.toml"\n'
                   '[profile]\nnodes = ["r1", "r2"]\nfrequency = 499\n'
                   '[[tests]]\nname = "bulk"\nkind = "tcp"\nfrom = "client"\nto = "exit"\n'
                   'duration = "2s"\n')
    name = new_lab_name()
    proc = subprocess.run([*HOPLAB, "run", str(exp), "--db", str(db), "--json", "--lab-name",
                           name, *extra], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_a_run_stores_its_profile_and_draws_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _run(tmp_path, db)
    _run(tmp_path, db)
    with open_store(str(db)) as store:
        first, second = (store.get_run(r.id) for r in store.list_runs())
    prof = first.metadata["profile"]
    assert prof["status"] == "ok" and prof["samples"] > 200
    assert prof["by_node"].keys() == {"r1", "r2"}
    shares = {m.name: m.value for m in first.metrics if m.name.startswith("profile.")}
    # Forwarding through two routers, with iperf3 at both ends: the network stack shows.
    assert shares.get("profile.forwarding and softirq", 0) > 1
    assert sum(shares.values()) == pytest.approx(100.0)
    svg = tmp_path / "f.svg"
    done = subprocess.run([*HOPLAB, "flamegraph", str(first.id), "--db", str(db), "-o",
                           str(svg)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    text = svg.read_text()
    assert text.startswith("<?xml") and "<svg" in text and "iperf3" in text
    diff_svg = tmp_path / "d.svg"
    done = subprocess.run([*HOPLAB, "flamegraph", "--diff", str(first.id), str(second.id),
                           "--db", str(db), "-o", str(diff_svg)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "<svg" in diff_svg.read_text()
    top = subprocess.run([*HOPLAB, "profile", str(first.id), "--db", str(db), "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(top.stdout)
    assert data["samples"] == prof["samples"] and len(data["top"]) == 20
    assert data["categories"] == pytest.approx(prof["categories"])


def test_without_perf_the_run_is_kept_and_its_profile_marked_missing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    out = _run(tmp_path, db, env={"HOPLAB_PERF": "/nonexistent/perf"})
    (run,) = out["runs"]
    assert run["status"] == "ok" and run["metrics"]["goodput"] > 0
    with open_store(str(db)) as store:
        rec = store.get_run(run["id"])
    assert rec.metadata["profile"]["status"] == "missing"
    assert "perf is not installed" in rec.metadata["profile"]["reason"]
    assert not [m for m in rec.metrics if m.name.startswith("profile.")]
    refused = subprocess.run([*HOPLAB, "flamegraph", str(rec.id), "--db", str(db)],
                             capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "missing" in refused.stderr
