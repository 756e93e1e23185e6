"""A run's profile in the report and the dashboard."""

from __future__ import annotations

import base64
import gzip
import re
from pathlib import Path

import pytest

from hoplab.profile.tools import find
from hoplab.record import Metric, RawOutput, RunRecord
from hoplab.render.report import build_report
from hoplab.store import open_store
from hoplab.web.app import Dashboard

FOLDED = b"iperf3-10;main;tcp_sendmsg_[k] 30\nwireguard-go-11;[wireguard-go] 10\n"
needs_inferno = pytest.mark.skipif(find("inferno-flamegraph") is None,
                                   reason="inferno is installed by make setup")


def profiled(status: str = "ok") -> RunRecord:
    prof = {"status": status, "frequency": 999, "phase": "load", "samples": 40,
            "attribution": "host-wide", "top": [["tcp_sendmsg_[k]", 75.0]],
            "categories": {"TCP/UDP endpoints": 75.0, "wireguard": 25.0},
            "by_node": {"r1": {"pids": [11], "samples": 10, "share_of_host": 25.0,
                               "top": []}}}
    if status != "ok":
        prof = {"status": status, "reason": "perf is not installed"}
    return RunRecord(experiment="e", test="t", kind="tcp", repetition=1, variant={},
                     labels={}, started_at=1.7e9, metadata={"profile": prof},
                     metrics=[Metric("goodput", 1e8, "bit/s")],
                     raw=[RawOutput("profile folded", FOLDED)] if status == "ok" else [])


@needs_inferno
def test_report_embeds_the_flame_graph_and_tables() -> None:
    html = build_report([profiled()], "mem")
    assert "CPU profile" in html and "TCP/UDP endpoints" in html and "75.0 %" in html
    # Packed (gzip, base64) and shown when it scrolls into view (render/page.py).
    holder = re.search(r'<div class="flame" data-packed="([^"]+)"', html)
    assert holder is not None
    packed = html.split(f'id="{holder.group(1)}">', 1)[1].split("</script>", 1)[0]
    svg = gzip.decompress(base64.b64decode(packed)).decode()
    assert "<svg" in svg and "tcp_sendmsg" in svg


def test_a_missing_profile_says_why() -> None:
    html = build_report([profiled("missing")], "mem")
    assert "no profile: perf is not installed" in html


@needs_inferno
def test_dashboard_serves_the_flame_graph(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.db")) as store:
        run_id = store.save_run(profiled())
        other = store.save_run(profiled("missing"))
        app = Dashboard(store)
        page = app.handle(f"/run/{run_id}")
        assert page.status == 200 and f"/run/{run_id}/flamegraph.svg".encode() in page.body
        svg = app.handle(f"/run/{run_id}/flamegraph.svg")
        assert svg.status == 200 and b"<svg" in svg.body
        assert app.handle(f"/run/{other}/flamegraph.svg").status >= 400
