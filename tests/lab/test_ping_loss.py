"""Ping loss on a long link, through `hoplab run`: probes in flight when the stream's
time is up are waited for, not counted lost (a known answer of exactly 0 %)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab.lab import wire
from hoplab.store import open_store
from tests.helpers.lab import hoplab, lab_namespaces, new_lab_name

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(wire.binary() is None, reason="hoplab-wire is not built")]

LAB = """
name = "p"
[nodes.a]
[nodes.b]
[[links]]
between = ["a", "b"]
emulator = "wire"
delay = "400ms"
"""


def test_ping_over_400ms_each_way_loses_nothing(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "lab.toml"\n[[tests]]\nname = "far"\nkind = "ping"\nfrom = "a"\n'
                   'to = "b"\ninterval = "200ms"\nduration = "5s"\n')
    name = new_lab_name()
    proc = hoplab("run", str(exp), "--db", str(tmp_path / "r.db"), "--json", "--lab-name", name,
                  timeout=120)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    # 25 probes leave in 5 s; with an 800 ms round trip the last 4 are still in flight
    # when the 5 s are up (ping -w 5 reported 16 % loss here).
    assert run["metrics"]["loss"] == 0.0
    assert abs(run["metrics"]["rtt_median"] - 800) < 5, run["metrics"]
    with open_store(str(tmp_path / "r.db")) as store:
        rec = store.get_run(run["id"])
    assert rec.metric("packets", flow="far") == 25
