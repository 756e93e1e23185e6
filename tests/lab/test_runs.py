"""`hoplab run` as a user runs it, with known answers: shaped rates, counters, loss."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hoplab.record import RunRecord
from hoplab.samplers import counter_delta
from hoplab.store import open_store
from tests.helpers.lab import hoplab, lab_namespaces, new_lab_name

pytestmark = [pytest.mark.root, pytest.mark.slow]

LAB = """
name = "k"
[nodes.client]
[nodes.r1]
[nodes.r2]
[nodes.r3]
[nodes.server]
[[links]]
between = ["client", "r1"]
[[links]]
between = ["r1", "r2"]
rate = "50mbit"
[[links]]
between = ["r2", "r3"]
[[links]]
between = ["r3", "server"]
"""


def run_experiment(tmp_path: Path, tests: str, *extra: str) -> tuple[dict[str, Any], Path]:
    (tmp_path / "lab.toml").write_text(LAB)
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "lab.toml"\nseed = 7\n' + tests)
    db = tmp_path / "runs.db"
    name = new_lab_name()
    proc = hoplab("run", str(exp), "--db", str(db), "--json", "--lab-name", name, *extra,
                  timeout=300)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), db


def stored(db: Path, run_id: int) -> RunRecord:
    with open_store(str(db)) as store:
        return store.get_run(run_id)


def test_shaped_bottleneck_goodput_and_router_counters(tmp_path: Path) -> None:
    out, db = run_experiment(tmp_path, """
[[tests]]
name = "bulk"
kind = "tcp"
from = "client"
to = "server"
flows = 2
duration = "5s"
samplers = { nodes = ["r1"], kinds = ["ifaces", "qdisc", "tcp"] }
""")
    (run,) = out["runs"]
    assert run["status"] == "ok"
    goodput = run["metrics"]["goodput"] / 1e6
    assert 45 <= goodput <= 50.5, f"{goodput:.2f} Mbit/s through a 50 Mbit/s link"
    rec = stored(db, run["id"])
    # Every series shares the run's clock: throughput and counters start near zero.
    thr = next(s for s in rec.series if s.name == "throughput" and s.flow is None)
    assert 0 < thr.t[0] <= 0.5 and thr.t[-1] >= 4.5
    # r1 forwards every data segment out of its interface towards r2: payload plus one
    # set of Ethernet, IP and TCP headers (14 + 20 + 32 bytes) per packet it sends. The
    # per-flow sums must match what the router counted.
    eth = next(i["name"] for i in rec.metadata["lab"]["nodes"]["r1"]["interfaces"]
               if i["peer"] == "r2")
    tx_bytes = counter_delta(_series(rec, "iface.tx_bytes", "r1", eth))
    tx_packets = counter_delta(_series(rec, "iface.tx_packets", "r1", eth))
    payload = sum(m.value for m in rec.metrics if m.name == "bytes_received" and m.flow)
    expected = payload + 66 * tx_packets
    assert abs(tx_bytes - expected) / tx_bytes < 0.02, (tx_bytes, payload, tx_packets)


def _series(rec: RunRecord, name: str, node: str, key: str) -> Any:
    return next(s for s in rec.series if s.name == name and s.node == node and s.key == key)


def test_ping_over_three_hops_loses_nothing_on_an_idle_lab(tmp_path: Path) -> None:
    out, db = run_experiment(tmp_path, """
[[tests]]
name = "idle-ping"
kind = "ping"
from = "client"
to = "server"
interval = "50ms"
duration = "4s"
""")
    (run,) = out["runs"]
    assert run["status"] == "ok"
    assert run["metrics"]["loss"] == 0.0
    rec = stored(db, run["id"])
    rtt = next(s for s in rec.series if s.name == "rtt")
    assert len(rtt.v) >= 70 and all(0 < v < 5 for v in rtt.v)
    rtt_min, rtt_median = (rec.metric(m, flow="idle-ping") for m in ("rtt_min", "rtt_median"))
    assert rtt_min is not None and rtt_median is not None and rtt_min <= rtt_median


def test_udp_at_twice_the_bottleneck_loses_about_half(tmp_path: Path) -> None:
    out, _ = run_experiment(tmp_path, """
[[tests]]
name = "flood"
kind = "udp"
from = "client"
to = "server"
rate = "100mbit"
length = 1200
duration = "4s"
""")
    (run,) = out["runs"]
    loss = run["metrics"]["loss"]
    # 100 Mbit/s of payload into 50 Mbit/s of wire (1242 bytes per 1200-byte datagram):
    # 51.7 % cannot pass.
    assert 40 <= loss <= 60, f"loss {loss:.1f} %"
    assert 45e6 <= run["metrics"]["goodput"] <= 50.5e6


def test_rrul_reports_latency_under_load_and_a_grade(tmp_path: Path) -> None:
    out, db = run_experiment(tmp_path, """
[[tests]]
name = "rrul"
kind = "rrul"
from = "client"
to = "server"
idle = "2s"
duration = "5s"
flows = 2
""")
    (run,) = out["runs"]
    m = run["metrics"]
    assert run["status"] == "ok", run["error"]
    assert m["latency_load"] > m["latency_idle"] > 0
    assert math.isclose(m["latency_increase"], m["latency_load"] - m["latency_idle"])
    # The HTB leaf is a 1000-packet FIFO at 50 Mbit/s: a loaded queue adds tens of ms.
    assert m["latency_increase"] > 5
    assert run["grade"] in ("A", "B", "C", "D", "F")
    # Only the upstream is shaped, but the download's ACKs wait in the same bloated
    # upstream queue as the upload, so both directions are slowed, as rrul shows on
    # asymmetric access links.
    assert 1e6 < m["goodput_up"] <= 50.5e6
    assert m["goodput_down"] > 1e6
    rec = stored(db, run["id"])
    assert {s.key for s in rec.series if s.name == "throughput" and s.flow is None} >= {
        "up", "down"}


def test_a_failing_tool_fails_its_run_with_the_tools_message(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "lab.toml"\n[[tests]]\nname = "cc"\nkind = "tcp"\nfrom = "client"\n'
                   'to = "server"\nduration = "1s"\ncongestion = "nosuchcc"\n'
                   '[[tests]]\nname = "fine"\nkind = "ping"\nfrom = "client"\nto = "server"\n'
                   'duration = "1s"\n')
    name = new_lab_name()
    proc = hoplab("run", str(exp), "--db", str(tmp_path / "r.db"), "--json", "--lab-name", name,
                  timeout=120)
    assert proc.returncode == 1, proc.stderr
    runs = {r["test"]: r for r in json.loads(proc.stdout)["runs"]}
    assert runs["cc"]["status"] == "failed"
    assert "iperf3" in runs["cc"]["error"] and "cc" in runs["cc"]["error"]
    # One failed run does not stop the experiment.
    assert runs["fine"]["status"] == "ok"
    assert lab_namespaces(name) == set()
