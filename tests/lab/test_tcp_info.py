"""The tcp_info sampler's known answer, through `hoplab run` as a user runs it: one cubic
flow through 20 Mbit/s with a 40 ms RTT and a 200-frame queue (hoplab-wire), three times
the bandwidth-delay product (66 frames). Once cubic has filled the queue and recovered
from the loss that ends its ramp, the link never idles: the delivery rate its sender
measures is the link's payload rate, 20e6 x 1448 / 1514 = 19.13 Mbit/s, and its smoothed
RTT grows with the queue as cubic's window grows back, until the queue overflows again
(3 s later on this machine)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from hoplab.lab import wire
from hoplab.record import RunRecord, Series
from hoplab.store import open_store
from tests.helpers.lab import hoplab, lab_namespaces, new_lab_name

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(wire.binary() is None, reason="hoplab-wire is not built")]

PAYLOAD_BPS = 20e6 * 1448 / 1514     # 19.13 Mbit/s
BASE_RTT_MS = 40.0

LAB = """
name = "ti"
[nodes.client]
[nodes.r1]
[nodes.server]
[[links]]
between = ["client", "r1"]
[[links]]
between = ["r1", "server"]
emulator = "wire"
rate = "20mbit"
delay = "20ms"
queue = 200
"""

EXPERIMENT = """
lab = "lab.toml"
[[tests]]
name = "cubic"
kind = "tcp"
from = "client"
to = "server"
duration = "5s"
congestion = "cubic"

[[tests]]
name = "both"
kind = "tcp"
from = "client"
to = "server"
direction = "bidir"
duration = "2s"
congestion = "cubic"
"""


def _one(run: RunRecord, name: str, node: str, key: str | None = None) -> Series:
    (s,) = [s for s in run.series if (s.name, s.node, s.key) == (name, node, key) and s.flow]
    return s


def test_one_cubic_flow_through_20mbit_and_a_queue_of_three_bdps(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text(LAB)
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    db = tmp_path / "runs.db"
    name = new_lab_name()
    proc = hoplab("run", str(tmp_path / "exp.toml"), "--db", str(db), "--json",
                  "--lab-name", name, timeout=120)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [r["status"] for r in out["runs"]] == ["ok", "ok"], out
    with open_store(str(db)) as store:
        runs = {r.test: r for r in (store.get_run(x["id"]) for x in out["runs"])}
    run, both = runs["cubic"], runs["both"]

    cwnd = _one(run, "tcp.cwnd", "client")
    srtt = _one(run, "tcp.srtt", "client")
    rate = _one(run, "tcp.delivery_rate", "client")
    assert cwnd.flow == "cubic" and cwnd.t == srtt.t == rate.t
    # The ramp ends in a loss once the queue is full, and cubic loses again each time its
    # window has grown back past the queue (3 s later here). The steady part: the longest
    # stretch between two rises of the retransmission count, less its first 0.3 s (the
    # recovery's end, the queue it drained), where cwnd only grows.
    retrans = _one(run, "tcp.retrans", "client")
    assert retrans.t == cwnd.t and retrans.v[-1] > 0
    stretches: list[list[int]] = []
    for i, v in enumerate(retrans.v):
        if v > 0 and (i == 0 or v != retrans.v[i - 1]):
            stretches.append([])
        if stretches:
            stretches[-1].append(i)
    longest = max(stretches, key=lambda idx: cwnd.t[idx[-1]] - cwnd.t[idx[0]])
    steady = [i for i in longest if cwnd.t[i] >= cwnd.t[longest[0]] + 0.3]
    shown = [(round(t, 1), v, round(r), round(d / 1e6, 2))
             for t, v, r, d in zip(cwnd.t, cwnd.v, srtt.v, rate.v, strict=True)]
    assert cwnd.t[steady[-1]] - cwnd.t[steady[0]] >= 1.0, shown
    got = statistics.median(rate.v[i] for i in steady)
    assert abs(got - PAYLOAD_BPS) <= 0.015 * PAYLOAD_BPS, (got, shown)
    # Never below the path's own RTT; above it by the queue, which grows with cwnd.
    assert min(srtt.v) >= BASE_RTT_MS
    assert BASE_RTT_MS <= min(_one(run, "tcp.min_rtt", "client").v) <= BASE_RTT_MS + 1.5
    third = len(steady) // 3
    early = statistics.median(srtt.v[i] for i in steady[:third])
    later = statistics.median(srtt.v[i] for i in steady[-third:])
    assert BASE_RTT_MS < early < later, (early, later, shown)

    # RFC 6349's figures, from the same series and the run's goodput.
    figures = {m.name: m.value for m in run.metrics if m.flow is None and m.node is None}
    sent, lost = (_one(run, n, "client").v[-1] for n in ("tcp.bytes_sent", "tcp.bytes_retrans"))
    assert 0 < lost < sent
    assert figures["tcp_efficiency"] == pytest.approx(100 * (sent - lost) / sent)
    assert figures["transfer_time_ratio"] == pytest.approx(PAYLOAD_BPS / figures["goodput"])
    assert 0.985 <= figures["transfer_time_ratio"] < 1.25
    assert figures["buffer_delay_ms"] > 0 and figures["buffer_delay_pct"] > 0

    # A --bidir flow: each direction read on its own sender, never the control connection.
    senders = {(s.node, s.key): s.v[-1] for s in both.series if s.name == "tcp.bytes_sent"}
    assert senders.keys() == {("client", "up"), ("server", "down")}
    assert min(senders.values()) > 1e6, senders
    ratios = {m.key: m.value for m in both.metrics if m.name == "transfer_time_ratio"}
    assert ratios.keys() == {"up", "down"}

    png = tmp_path / "state.png"
    drawn = hoplab("plot", str(run.id), "--kind", "tcpinfo", "--db", str(db), "-o", str(png))
    assert drawn.returncode == 0, drawn.stderr
    assert png.read_bytes().startswith(b"\x89PNG")
