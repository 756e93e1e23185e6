"""Every captured iperf3 -J output imports as a run with the figures its JSON states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab.importers import Options, load_file
from hoplab.record import RunRecord
from hoplab.store import open_store

DATA = Path(__file__).resolve().parents[1] / "data" / "iperf3"
FILES = sorted(DATA.glob("*.json"))


def _imported(path: Path, tmp_path: Path) -> RunRecord:
    with open_store(str(tmp_path / "s.db")) as store:
        run_id = store.save_run(load_file(path, Options(labels={"device": "rpi"})))
        return store.get_run(run_id, raw=True)


def test_the_captures_are_all_there() -> None:
    assert len(FILES) == 16


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_capture_imports_with_kind_status_goodput_streams_and_series(
        path: Path, tmp_path: Path) -> None:
    doc = json.loads(path.read_text())
    run = _imported(path, tmp_path)
    protocol = (doc["start"].get("test_start") or {}).get("protocol", "TCP")
    assert run.kind == protocol.lower()
    assert run.test == path.stem and run.experiment == "imported"
    assert run.labels == {"source": "iperf3", "device": "rpi"}
    if "error" in doc:
        assert run.status == "failed" and run.error == f"iperf3: {doc['error']}"
    else:
        assert run.status == "ok" and run.error is None
    if protocol == "TCP":
        received = (doc["end"].get("sum_received") or {}).get("bits_per_second", 0.0)
        # --bidir: both directions, as the summed series.
        received += (doc["end"].get("sum_received_bidir_reverse") or {}).get(
            "bits_per_second", 0.0)
        assert run.metric("goodput") == pytest.approx(received)
    streams = len(doc["start"]["connected"])
    flows = [s for s in run.series if s.name == "throughput" and s.flow is not None]
    assert len(flows) == streams
    totals = [s for s in run.series if s.name == "throughput" and s.flow is None
              and s.key is None]
    if streams:
        (total,) = totals
        longest = max(len(s.v) for s in flows)
        assert len(total.v) == longest
        for i, value in enumerate(total.v):
            assert value == pytest.approx(sum(s.v[i] for s in flows if i < len(s.v)))
    else:
        assert totals == []
    assert run.raw[0].data == path.read_bytes()
    assert run.raw[0].media_type == "application/json"
    stamp = doc["start"].get("timestamp")
    if stamp:
        assert run.started_at == stamp["timesecs"]
    assert run.metadata["iperf3"]["version"] == doc["start"]["version"]


def test_udp_figures_come_from_the_receiver() -> None:
    doc = json.loads((DATA / "udp_200m.json").read_text())
    run = load_file(DATA / "udp_200m.json", Options())
    rcv = doc["end"]["sum_received"]
    assert run.metric("loss") == rcv["lost_percent"]
    assert run.metric("udp_jitter") == pytest.approx(rcv["jitter_ms"])
    assert run.metric("sent_rate") == doc["end"]["sum_sent"]["bits_per_second"]


def test_reverse_and_bidir_carry_directions() -> None:
    rev = load_file(DATA / "tcp_reverse.json", Options(test="down", experiment="old"))
    assert (rev.test, rev.experiment) == ("down", "old")
    assert {s.key for s in rev.series if s.flow is None} == {None, "down"}
    assert rev.metric("goodput_down") == rev.metric("goodput")
    bidir = load_file(DATA / "tcp_bidir.json", Options())
    doc = json.loads((DATA / "tcp_bidir.json").read_text())
    assert {s.key for s in bidir.series if s.flow is not None} == {"up", "down"}
    assert bidir.metric("goodput_up") == doc["end"]["sum_received"]["bits_per_second"]
    assert bidir.metric("goodput_down") == \
        doc["end"]["sum_received_bidir_reverse"]["bits_per_second"]
    # The run's goodput counts both directions, as its summed series does.
    assert bidir.metric("goodput") == pytest.approx(
        doc["end"]["sum_received"]["bits_per_second"]
        + doc["end"]["sum_received_bidir_reverse"]["bits_per_second"])


def test_upload_series_use_the_servers_receiver_side_intervals() -> None:
    path = DATA / "tcp_p2_server_output.json"
    doc = json.loads(path.read_text())
    run = load_file(path, Options())
    server_first = doc["server_output_json"]["intervals"][0]["streams"]
    got = sorted(s.v[0] for s in run.series if s.flow is not None)
    assert got == sorted(float(s["bits_per_second"]) for s in server_first)
