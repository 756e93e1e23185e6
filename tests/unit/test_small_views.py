"""Small things every view says (issue 19): run ids as ranges, variant values as the
experiment file writes them, quiet exits on a closed pipe, rrul's point in `runs`."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from hoplab import kv
from hoplab.cli.run import _progress, stored_line
from hoplab.record import RunRecord
from hoplab.render.plot_parts import variant_label
from hoplab.render.units import id_list, pairs
from hoplab.spec.experiment_loader import load_experiment
from tests.helpers.runs import real_store

HOPLAB = str(Path(sys.executable).with_name("hoplab"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_ids_read_as_ranges() -> None:
    assert id_list([3]) == "3"
    assert id_list(range(1, 19)) == "1-18"
    assert id_list([9, 4, 5, 6, 4]) == "4-6, 9"
    assert stored_line([3], "sqlite x.db", "ab12").startswith("stored run 3 in sqlite x.db")
    assert stored_line([1, 2, 3], "sqlite x.db", "ab12").startswith("stored runs 1-3 in")


def test_variant_values_as_the_file_writes_them() -> None:
    variant = {"hops": 2, "wireguard": False, "rate": 0.5, "fw": "v1.10", "on": True}
    text = "hops=2 wireguard=false rate=0.5 fw=v1.10 on=true"
    assert kv.pairs(variant) == text and pairs(variant) == text
    assert variant_label(variant) == text
    assert kv.pairs({}) == "-" and variant_label({}) == "(no variant)"


def test_a_run_that_did_not_finish_names_its_variant_as_pairs() -> None:
    exp = load_experiment(str(EXAMPLES / "wireguard-profile.toml"), [])
    out = io.StringIO()
    progress, _ = _progress(exp, None, Console(file=out, width=200))
    rec = RunRecord(experiment="e", test="under-load", kind="rrul", repetition=1,
                    variant={"hops": 1, "wireguard": False}, labels={}, started_at=0.0,
                    status="interrupted", error="interrupted by SIGTERM", id=27)
    progress.end_run(rec)
    assert out.getvalue().strip() == ("run 27 (under-load hops=1 wireguard=false) "
                                      "interrupted: interrupted by SIGTERM")
    assert [v.label() for v in exp.variants] == ["wireguard=false", "wireguard=true"]


def test_runs_shows_rrul_loaded_rtt_and_added_latency(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hoplab.cli.main import main

    real_store(tmp_path / "s.db", "rrul")
    assert main(["runs", "--db", str(tmp_path / "s.db")]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for said in ("idle RTT 0.205 ms", "loaded RTT 34.5 ms", "added latency 34.3 ms"):
        assert said in out


@pytest.mark.parametrize("args", [
    ["compare", "1", "2"], ["compare", "1", "2", "--json"], ["runs"], ["runs", "--json"],
    ["show", "1"], ["show", "1", "--json"], ["export", "1"]])
def test_a_closed_stdout_ends_every_command_quietly(tmp_path: Path, args: list[str]) -> None:
    """`hoplab ... | head`: the reader went away before hoplab wrote. A pipe whose read
    end is closed fails the first write, whatever the output's size."""
    db = tmp_path / "s.db"
    real_store(db, "tcp", "tcp")
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([HOPLAB, *args, "--db", str(db)], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")
