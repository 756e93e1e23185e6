"""A device's profile (perf on the device) is all the device's: `hoplab profile RUN --node
DEVICE` keeps every sample, the report says so, and neither calls it host-wide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab.cli.main import main
from hoplab.profile import analyze
from hoplab.profile.phase import attribution
from hoplab.profile.stored import run_stacks
from hoplab.record import Metric, RawOutput, RunRecord
from hoplab.render.profile_html import profile_section
from hoplab.store import open_store

# perf's folded stacks with PIDs: the device's forwarding in softirq, an iperf3 on it.
FOLDED = (b"swapper-0/0;ret_from_fork;net_rx_action_[k];ip_forward_[k] 70\n"
          b"iperf3-812/812;main;tcp_sendmsg_[k] 30\n")


def _run(node: str, whole: bool) -> RunRecord:
    prof = {"status": "ok", "frequency": 999, "phase": "load", "samples": 100,
            "attribution": attribution([node], [node] if whole else []),
            "top": [["ip_forward_[k]", 70.0]], "categories": {},
            "by_node": {node: {"pids": [], "whole_machine": whole,
                               "samples": 100 if whole else 0,
                               "share_of_host": 100.0 if whole else 0.0, "top": []}}}
    return RunRecord(experiment="e", test="t", kind="tcp", repetition=1, variant={},
                     labels={}, started_at=1.7e9, metadata={"profile": prof},
                     metrics=[Metric("goodput", 1e8, "bit/s")],
                     raw=[RawOutput("profile folded", FOLDED)])


def test_a_device_profile_is_all_the_devices(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "runs.db")
    with open_store(db) as store:
        device = store.save_run(_run("router", whole=True))
        local = store.save_run(_run("r1", whole=False))
        _, stacks = run_stacks(store, device, "router")
        _, none = run_stacks(store, local, "r1")
    # Every sample is the device's: its kernel's forwarding too, not just its processes.
    assert analyze.samples(stacks) == 100
    # A namespace has only its processes (none here); its forwarding is host-wide.
    assert analyze.samples(none) == 0
    said = attribution(["router"], ["router"])
    assert said.startswith("device-wide: perf ran on router itself") and "host-wide" not in said
    assert attribution(["r1"], []).startswith("host-wide")
    assert main(["profile", str(device), "--node", "router", "--json", "--db", db]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == 100 and out["attribution"] == said
    html = str(profile_section(_run("router", whole=True), None))
    assert "device-wide" in html and "all (a device)" in html
