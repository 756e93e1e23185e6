"""Flent data files: the real captures in tests/data/flent and small files with known values."""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from hoplab.analysis.stats import median
from hoplab.errors import UsageError
from hoplab.importers import Options, load_file

DATA = Path(__file__).resolve().parents[1] / "data" / "flent"


def _doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return doc


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "t.flent.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_real_ping_capture() -> None:
    path = DATA / "ping_loopback.flent.gz"
    doc = _doc(path)
    run = load_file(path, Options(labels={"site": "lab"}))
    assert (run.kind, run.test, run.status) == ("ping", "ping", "ok")
    assert run.labels == {"source": "flent", "title": "loopback ping", "site": "lab"}
    assert run.started_at == datetime.fromisoformat(doc["metadata"]["T0"]).timestamp()
    rtts = {s.flow: s for s in run.series if s.name == "rtt"}
    assert set(rtts) == {"Ping (ms) ICMP", "Ping (ms) UDP"}
    icmp = rtts["Ping (ms) ICMP"]
    assert icmp.unit == "ms" and icmp.v == doc["results"]["Ping (ms) ICMP"]
    assert icmp.t == doc["x_values"]
    pooled = [v for s in rtts.values() for v in s.v]
    assert run.metric("rtt_median") == pytest.approx(median(pooled))
    assert run.metadata["flent"]["TITLE"] == "loopback ping"
    assert run.raw[0].data == path.read_bytes()


def test_real_throughput_capture() -> None:
    path = DATA / "tcp_2up_iperf_loopback.flent.gz"
    doc = _doc(path)
    run = load_file(path, Options())
    assert run.kind == "tcp" and run.duration_s == 15
    flows = {s.flow: s for s in run.series if s.name == "throughput" and s.flow}
    assert set(flows) == {"TCP upload::1", "TCP upload::2"}
    want = [v * 1e6 for v in doc["results"]["TCP upload::1"] if v is not None]
    assert flows["TCP upload::1"].v == pytest.approx(want)
    assert flows["TCP upload::1"].unit == "bit/s"
    (total,) = [s for s in run.series if s.name == "throughput" and s.flow is None]
    flent_sum = [v * 1e6 for v in doc["results"]["TCP upload sum"] if v is not None]
    assert total.v == pytest.approx(flent_sum)
    assert run.metric("goodput") == pytest.approx(sum(flent_sum) / len(flent_sum))
    assert [p["name"] for p in run.metadata["test"]["phases"]] == ["idle", "load",
                                                                   "idle-after"]
    assert run.metadata["test"]["phases"][1]["start_s"] == total.t[0]
    others = {s.key for s in run.series if s.name == "flent"}
    assert others == {"TCP upload avg", "TCP upload fairness"}


def test_known_values_both_directions_and_nulls(tmp_path: Path) -> None:
    doc = {
        "version": 4, "x_values": [0.0, 1.0, 2.0, 3.0],
        "metadata": {"NAME": "rrul", "TITLE": "home", "T0": "2020-01-02T03:04:05Z",
                     "TOTAL_LENGTH": 4, "FAILED_RUNNERS": 1, "LOCAL_HOST": "laptop",
                     "SERIES_META": {
                         "TCP upload::1": {"UNITS": "Mbits/s", "RUNNER": "NetperfDemoRunner"},
                         "TCP download::1": {"UNITS": "Mbits/s"},
                         "TCP upload sum": {"UNITS": "Mbits/s", "RUNNER": "SumRunner"},
                         "TCP download sum": {"UNITS": "Mbits/s", "RUNNER": "SumRunner"},
                         "Ping (ms) ICMP": {"UNITS": "ms", "RUNNER": "PingRunner"}}},
        "results": {"TCP upload::1": [None, 10.0, 20.0, None],
                    "TCP download::1": [None, 30.0, None, None],
                    "TCP upload sum": [None, 10.0, 20.0, None],
                    "TCP download sum": [None, 30.0, None, None],
                    "Ping (ms) ICMP": [1.0, 5.0, 7.0, 2.0]},
    }
    run = load_file(_write(tmp_path, doc), Options(experiment="home"))
    assert (run.kind, run.test, run.experiment) == ("rrul", "rrul", "home")
    assert run.status == "failed" and "1 runner" in (run.error or "")
    assert run.started_at == 1577934245.0
    by = {(s.flow, s.key): s for s in run.series if s.name == "throughput"}
    assert by[("TCP upload::1", None)].t == [1.0, 2.0]
    assert by[("TCP upload::1", None)].v == [10e6, 20e6]
    assert by[(None, "up")].v == [10e6, 20e6] and by[(None, "down")].v == [30e6]
    assert by[(None, None)].v == [40e6, 20e6]       # summed from the flows: no Flent total
    assert run.metric("goodput_up") == 15e6 and run.metric("goodput") == 30e6
    assert run.metric("latency_load") == 6.0 and run.metric("latency_idle") == 1.5
    assert run.metadata["host"] == "laptop"


@pytest.mark.parametrize("damage", ["truncated gzip", "bad length", "not json"])
def test_damaged_files_are_usage_errors_naming_the_file(damage: str, tmp_path: Path) -> None:
    good = (DATA / "ping_loopback.flent.gz").read_bytes()
    path = tmp_path / "bad.flent.gz"
    if damage == "truncated gzip":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "bad length":
        doc = _doc(DATA / "ping_loopback.flent.gz")
        doc["results"]["Ping (ms) ICMP"].pop()
        path = _write(tmp_path, doc, "bad.flent.gz")
    else:
        path.write_bytes(gzip.compress(b'{"x_values": [0, 1], "results": '))
    with pytest.raises(UsageError, match=str(path)):
        load_file(path, Options())
