"""Where a bulk flow's iperf3 intervals go on the run clock (hoplab.kinds.tcp.clock_start)
and how the start of its data is seen (hoplab.run.procs), on real iperf3 outputs and
real processes."""

from __future__ import annotations

import json
import subprocess
import time
from functools import partial
from pathlib import Path

import pytest

from hoplab.kinds.flow import Outcome
from hoplab.kinds.tcp import REPORT_DELAY_S, client_lag, clock_start, collect_bulk
from hoplab.nodes.procs import written_by
from hoplab.run.procs import CONTROL_BYTES, DataStart, _Watcher
from hoplab.spec.experiment import Flow
from hoplab.tools import iperf3

DATA = Path(__file__).resolve().parents[1] / "data" / "iperf3"


def _last_end(doc: dict[str, object]) -> float:
    intervals = doc["intervals"]
    assert isinstance(intervals, list)
    return max(float(s["end"]) for step in intervals for s in step["streams"])


def _lengths(name: str) -> tuple[iperf3.Result, float, float | None]:
    """The parsed report, its client's last interval end and its server's (or None),
    read from the JSON directly."""
    text = (DATA / name).read_text()
    doc = json.loads(text)
    server = doc.get("server_output_json")
    return iperf3.parse(text), _last_end(doc), _last_end(server) if server else None


def test_the_data_start_places_the_test_when_it_was_seen() -> None:
    res, _, _ = _lengths("tcp_p2_server_output.json")
    # The client was started at 0.0; its data moved at 0.217 (another flow's queue
    # delayed its set-up); its report, at 1.3, would say 0.29.
    assert clock_start(res, 0.0, 0.217, 1.3) == 0.217


@pytest.mark.parametrize("name", ["tcp_p2_server_output.json", "tcp_bidir_server_output.json",
                                  "tcp_reverse.json", "udp_200m.json"])
def test_without_a_data_start_the_report_time_less_the_test_length(name: str) -> None:
    # A server's clock ends when the client's TEST_END reaches it, after the client's
    # own: the longer of the two is the test's length.
    res, client, server = _lengths(name)
    length = max(client, server or 0.0)
    assert length > 0.8
    done = 0.25 + length + REPORT_DELAY_S
    assert clock_start(res, 0.0, None, done) == pytest.approx(0.25, abs=1e-9)
    if server is not None:
        assert server > client  # the server's length is the one used


def test_the_test_never_starts_before_its_client() -> None:
    res, _, _ = _lengths("tcp_upload.json")
    assert clock_start(res, 2.0, None, 2.5) == 2.0
    assert clock_start(res, 2.0, 1.9, None) == 2.0
    assert clock_start(res, 2.0, None, None) == 2.0


def test_a_report_without_intervals_is_placed_at_its_clients_start() -> None:
    res = iperf3.parse((DATA / "error_refused.json").read_text())
    assert clock_start(res, 1.5, None, 9.0) == 1.5


def test_bulk_series_and_span_start_at_the_data_start() -> None:
    # Before: the intervals were placed at the client's start (0.0), so two flows whose
    # set-ups took different times overlapped wrongly and their sum ran 2.5-4.7 % high.
    text = (DATA / "tcp_p2_server_output.json").read_text()
    out = Outcome(Flow(name="f", kind="tcp", src="a", dst="b", duration_s=1.0))
    collect_bulk(out, text, 0.0, (0.0, 1.0), 0.3, 1.35)
    (thr,) = [s for s in out.series if s.name == "throughput"]
    first_end = min(i.end for s in iperf3.parse(text).server.streams  # type: ignore[union-attr]
                    for i in s.intervals)
    assert thr.t[0] == pytest.approx(0.3 + first_end, abs=1e-3)  # kept to the ms
    assert out.span is not None and out.span[0] == 0.3


def test_a_downloads_intervals_start_when_the_word_to_start_reached_its_client() -> None:
    # A real download through the lab's 50 Mbit/s bottleneck, started while another
    # download filled the queue: the server's clock started 61 ms before the client's
    # (the word to start waited in that queue), and ran 61 ms longer.
    name = "tcp_reverse_queued_server_output.json"
    res, client, server = _lengths(name)
    assert server is not None and res.reverse
    assert client_lag(res) == pytest.approx(server - client) and 0.05 < client_lag(res) < 0.07
    out = Outcome(Flow(name="f", kind="tcp", src="a", dst="b", duration_s=5.0,
                       direction="down"))
    collect_bulk(out, (DATA / name).read_text(), 0.0, (0.0, 5.0), 0.2, None)
    (thr,) = [s for s in out.series if s.name == "throughput"]
    first_end = min(i.end for s in res.streams for i in s.intervals)
    assert thr.t[0] == pytest.approx(0.2 + client_lag(res) + first_end, abs=1e-3)
    assert out.span is not None and out.span[0] == pytest.approx(0.2 + client_lag(res))


def test_no_lag_for_an_upload_or_without_the_servers_report() -> None:
    # An upload's series are the server's, on the server's clock: not shifted.
    text = (DATA / "tcp_p2_server_output.json").read_text()
    out = Outcome(Flow(name="f", kind="tcp", src="a", dst="b", duration_s=1.0))
    collect_bulk(out, text, 0.0, (0.0, 1.0), 0.3, None)
    server_first = min(i.end for s in iperf3.parse(text).server.streams  # type: ignore[union-attr]
                       for i in s.intervals)
    assert out.series[0].t[0] == pytest.approx(0.3 + server_first, abs=1e-3)
    assert client_lag(iperf3.parse((DATA / "tcp_reverse.json").read_text())) == 0.0


def _watch(script: str) -> tuple[DataStart, float]:
    watcher = _Watcher()
    ds = DataStart()
    with open("/dev/null", "wb") as sink:
        t = time.time()
        proc = subprocess.Popen(["sh", "-c", script], stdout=sink)
    watcher.add(ds, partial(written_by, proc.pid))
    try:
        proc.wait(timeout=10)
        # Until the watcher has polled since the exit: it then either noted the data or
        # dropped the process (its io file gone). A fixed 50 ms was too short for its
        # thread in the idle scheduling class beside the pool (6f0474b's fresh-clone run).
        deadline = time.monotonic() + 10
        while ds.at is None and ds.pids:
            assert time.monotonic() < deadline, "the watcher did not poll in 10 s"
            time.sleep(0.01)
    finally:
        watcher.stop()
    return ds, t


def test_the_data_start_is_the_first_write_past_the_control_messages(tmp_path: Path) -> None:
    # Some control-sized writes first (a cookie, the parameters), then data 0.3 s later:
    # the watcher notes the data, not the control messages. The shell writes the data
    # itself (printf is a builtin) and lives on, as a bulk tool does: the io file of a
    # process that has exited is readable by root only (make check runs as any user).
    # The data is written between the shell's times `before` and `after`. The watcher
    # puts the start midway between the poll that did not see it and the one that did:
    # a millisecond apart on a quiet machine, but its thread went unrun 0.86 s beside
    # the pool once (41c152c's fresh-clone run), so the bound is that bracket's half.
    before, after = tmp_path / "before", tmp_path / "after"
    ds, _ = _watch(f"printf '%{CONTROL_BYTES // 2}s' x; sleep 0.3; date +%s.%N > {before}; "
                   f"printf '%131072s' x; date +%s.%N > {after}; sleep 0.2")
    assert ds.at is not None and ds.seen is not None and ds.polled is not None
    data_at, data_end = float(before.read_text()), float(after.read_text())
    # The poll that missed it came before the data was written; the one that saw it
    # after (a watcher that took the control messages for data saw them 0.3 s before).
    assert ds.polled <= data_end and ds.seen >= data_at, (ds.polled, data_at, ds.seen)
    assert ds.at == pytest.approx((ds.polled + ds.seen) / 2)


def test_a_process_that_writes_no_data_has_no_data_start() -> None:
    ds, _ = _watch(f"printf '%{CONTROL_BYTES // 2}s' x; sleep 0.1")
    assert ds.at is None
    assert ds.pids == []  # the exited process is no longer polled


def _switches(tid: int) -> int:
    with open(f"/proc/self/task/{tid}/status") as f:
        return sum(int(line.split()[1]) for line in f
                   if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt")))


def test_the_watcher_sleeps_once_every_flow_has_started() -> None:
    # It polls every millisecond only while a flow's data has yet to move; a thousand
    # wake-ups a second through the rest of a test would take CPU from the flows.
    watcher = _Watcher()
    try:
        ds = DataStart()
        watcher.add(ds, lambda: CONTROL_BYTES + 1)
        deadline = time.monotonic() + 5
        while ds.at is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ds.at is not None
        tid = watcher.thread.native_id
        assert tid is not None
        time.sleep(0.05)
        before = _switches(tid)
        time.sleep(0.5)
        assert _switches(tid) - before <= 5
        # A flow added later is watched again at once.
        late = DataStart()
        watcher.add(late, lambda: CONTROL_BYTES + 1)
        deadline = time.monotonic() + 5
        while late.at is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert late.at is not None
    finally:
        watcher.stop()
    assert not watcher.thread.is_alive()
