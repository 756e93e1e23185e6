"""`hoplab run`, `runs` and `show` against SQLite and a real PostgreSQL server."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.profile.tools import find

REPO = Path(__file__).resolve().parents[2]
_CLI = Path(sys.executable).with_name("hoplab")
HOPLAB = [str(_CLI)] if _CLI.exists() else [sys.executable, "-m", "hoplab.cli.main"]

needs_lab = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ping") is None,
                               reason="needs root and ping to build a lab")


def hoplab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOPLAB, *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)


@needs_lab
@pytest.mark.root
def test_runs_and_show_read_back_what_run_stored(store_url: str, tmp_path: Path) -> None:
    exp = tmp_path / "exp.toml"
    # One run per variant: two runs tell --filter and --limit (the last N, not the
    # first) apart; the store's own tests order and page many more.
    exp.write_text(f'lab = "{REPO}/examples/chain.toml"\nrepeat = 1\n'
                   'labels = { device = "veth" }\n[matrix]\nhops = [1, 2]\n'
                   '[profile]\nfrequency = 199\nduring = "all"\n'
                   '[[tests]]\nname = "rtt"\nkind = "ping"\nfrom = "client"\nto = "server"\n'
                   'interval = "20ms"\nduration = "1s"\n')
    lab = "t" + secrets.token_hex(4)
    ran = hoplab("run", str(exp), "--db", store_url, "--json", "--lab-name", lab)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert len(out["runs"]) == 2 and all(r["status"] == "ok" for r in out["runs"])
    listed = hoplab("runs", "--db", store_url, "--json", "--filter", "hops=2")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [r["variant"] for r in runs] == [{"hops": 2}]
    assert all(r["labels"] == {"device": "veth"} for r in runs)
    # --limit N: the last N runs.
    last = json.loads(hoplab("runs", "--db", store_url, "--json", "--limit", "1").stdout)
    assert [r["id"] for r in last] == [max(r["id"] for r in out["runs"])]
    shown = hoplab("show", str(runs[0]["id"]), "--db", store_url, "--json")
    assert shown.returncode == 0, shown.stderr
    rec = json.loads(shown.stdout)
    assert rec["test"] == "rtt" and rec["metadata"]["kernel"] == os.uname().release
    assert {m["name"] for m in rec["metrics"]} >= {"rtt_median", "loss"}
    rtt = next(s for s in rec["series"] if s["name"] == "rtt")
    assert rtt["n"] >= 40
    text = hoplab("show", str(runs[0]["id"]), "--db", store_url)
    assert text.returncode == 0 and "RTT median" in text.stdout
    assert hoplab("show", "999999", "--db", store_url).returncode == 2
    # The profile is kept with the run in either store, and read back from it.
    if rec["metadata"]["profile"]["status"] == "ok":
        prof = hoplab("profile", str(runs[0]["id"]), "--db", store_url, "--json")
        assert prof.returncode == 0, prof.stderr
        assert json.loads(prof.stdout)["samples"] == rec["metadata"]["profile"]["samples"] > 0
    else:
        assert find("perf") is None or find("inferno-collapse-perf") is None
