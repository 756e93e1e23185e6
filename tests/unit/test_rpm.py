"""The arithmetic of responsiveness (hoplab.analysis.rpm, draft-ietf-ippm-responsiveness-08)
by hand and on recorded probe timings (tests/data/rpm: the client's output of two runs
through a 20 Mbit/s hoplab-wire link), and the client's output parser."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from hoplab.analysis import rpm as algo
from hoplab.errors import SpecError
from hoplab.kinds.responsiveness import RpmOptions, figures_of, goodput_by_way
from hoplab.run.server_home import write_local
from hoplab.spec.experiment import Test
from hoplab.spec.experiment_loader import load_experiment
from hoplab.tools import ToolOutputError, rpm_client, rpm_server
from tests.helpers.lab_text import chain3

DATA = Path(__file__).resolve().parents[1] / "data" / "rpm"
FIFO = DATA / "down-20mbit-fifo1000.ndjson"
FQ = DATA / "down-20mbit-fq_codel.ndjson"


def test_the_trimmed_mean_drops_what_lies_above_the_95th_percentile() -> None:
    # Nearest rank: 20 values keep the smallest 19, 10 keep all ten.
    assert algo.trimmed_mean([float(x) for x in range(1, 21)]) == 10.0
    assert algo.trimmed_mean([float(x) for x in range(1, 11)]) == 5.5
    # 40 values keep 38 (both outliers go), 39 keep 38 (the largest goes).
    assert algo.trimmed_mean([5.0, 1000.0] + [1.0] * 38) == 1.0
    assert algo.trimmed_mean([5.0, 1000.0] + [1.0] * 37) == pytest.approx((5 + 37) / 38)
    assert math.isnan(algo.trimmed_mean([]))


def test_rpm_averages_the_foreign_and_the_loaded_responsiveness() -> None:
    foreign = [algo.Foreign(0, tcp_ms=10, tls_ms=20, http_ms=30)]
    selfs = [algo.Self(0, 60)]
    got = algo.responsiveness(foreign, selfs)
    assert got is not None
    # Foreign: 60000 / ((10 + 20 + 30) / 3) = 3000; loaded: 60000 / 60 = 1000.
    assert (got.foreign_ms, got.self_ms, got.rpm) == (20, 60, 2000)
    # Without TLS the foreign part is TCP and HTTP alone, each half (the TCP-only case).
    tcp_only = algo.responsiveness([algo.Foreign(0, 10, None, 30)], selfs)
    assert tcp_only is not None and tcp_only.foreign_ms == 20
    assert algo.responsiveness(foreign, []) is None


def test_stability_is_the_spread_of_the_last_mad_values_against_the_latest() -> None:
    assert algo.stable([100, 101, 99, 100])
    assert not algo.stable([100, 120, 80, 100])
    assert not algo.stable([100, 100, 100])        # fewer than MAD values
    # Only the last MAD count.
    assert algo.stable([1, 1000, 100, 101, 99, 100])
    assert algo.moving_average([1, 2, 3, 4, 5], 4) == 3.5
    assert algo.moving_average([1, 2, 3], 2) is None


def test_steady_goodput_and_probes_reach_high_confidence_at_the_earliest_interval() -> None:
    prog = algo.Progress()
    foreign: list[algo.Foreign] = []
    selfs: list[algo.Self] = []
    i = 0
    while not prog.done:
        foreign.append(algo.Foreign(i, 10, 10, 10))
        selfs.append(algo.Self(i, 30))
        prog.interval(i, 20e6, foreign, selfs)
        i += 1
    # Goodput: MAD moving averages, the first after MAD intervals: stable at interval 6;
    # then MAD responsiveness values: stable at 9.
    assert (prog.goodput.stable_at, prog.rpm.stable_at) == (6, 9)
    assert prog.confidence() == algo.HIGH
    assert prog.result(foreign, selfs) == algo.Responsiveness(
        (6000 + 2000) / 2, 10, 30, 4, 4)


def test_confidence_is_low_before_mad_intervals_and_medium_when_never_stable() -> None:
    prog = algo.Progress()
    for i, bps in enumerate([1e6, 5e6, 9e6, 2e6]):
        prog.interval(i, bps, [], [])
    assert prog.confidence() == algo.LOW
    for i, bps in enumerate([20e6, 1e6, 30e6, 2e6], start=4):
        prog.interval(i, bps, [], [])
    assert len(prog.goodput.values) >= algo.MAD and not prog.saturated
    assert prog.goodput.confidence() == algo.MEDIUM


def test_probes_take_at_most_ptc_of_the_capacity_and_mps() -> None:
    # 5 % of 20 Mbit/s is 125,000 bytes a second: 20 pairs of 6000 bytes.
    assert algo.probe_pairs(20e6) == 20
    assert algo.probe_pairs(10e9) == algo.MPS
    assert algo.probe_pairs(0.0) == 1


@pytest.mark.parametrize("path", [FIFO, FQ], ids=["fifo", "fq_codel"])
def test_a_recorded_run_replays_to_the_trimmed_means_of_its_last_four_intervals(
        path: Path) -> None:
    res = rpm_client.parse(path.read_text())
    assert res.done is not None and res.done["reason"] == "time"
    assert [iv.index for iv in res.intervals] == list(range(10))
    prog = rpm_client.replay(res)
    got = prog.result(res.foreign, res.selfs)
    assert got is not None
    # By hand: the probes that completed in intervals 6-9, each list trimmed at its 95th
    # percentile by nearest rank.
    last = [p for p in res.foreign if p.interval >= 6]
    tail = [p for p in res.selfs if p.interval >= 6]

    def tm(values: list[float]) -> float:
        keep = sorted(values)[:math.ceil(0.95 * len(values))]
        return sum(keep) / len(keep)

    tls = [p.tls_ms for p in last if p.tls_ms is not None]
    foreign_ms = (tm([p.tcp_ms for p in last]) + tm(tls) + tm([p.http_ms for p in last])) / 3
    self_ms = tm([p.http_ms for p in tail])
    assert got.foreign_ms == pytest.approx(foreign_ms)
    assert got.self_ms == pytest.approx(self_ms)
    assert got.rpm == pytest.approx((60000 / foreign_ms + 60000 / self_ms) / 2)
    assert (got.foreign_probes, got.self_probes) == (len(last), len(tail))
    # The time given to goodput ran out at interval 4 (half of 10 s): responsiveness was
    # computed from then on, never stable; goodput's MAD averages ran: medium.
    assert res.done["goodput_forced_at"] == 4 and len(prog.rpm.values) == 6
    assert prog.confidence() == algo.MEDIUM
    metrics = {(m.name, m.key): m.value for m in figures_of(res, "rpm")}
    assert metrics[("rpm", None)] == got.rpm
    assert metrics[("rpm_confidence", None)] == algo.MEDIUM


def test_the_recorded_fifo_run_waits_in_the_full_queue_and_fq_codel_does_not() -> None:
    fifo, fq = (rpm_client.parse(p.read_text()) for p in (FIFO, FQ))
    a, b = (rpm_client.replay(r).result(r.foreign, r.selfs) for r in (fifo, fq))
    assert a is not None and b is not None
    # A full 1000-packet FIFO at 20 Mbit/s is 606 ms: each part of a foreign probe (a
    # handshake, a GET) waits in it; fq_codel serves a new flow's few packets at once.
    assert a.foreign_ms > 300 and b.foreign_ms < 60, (a, b)
    assert b.rpm > 3 * a.rpm


def test_goodput_of_the_last_intervals_is_their_bytes_over_their_time() -> None:
    res = rpm_client.parse(FIFO.read_text())
    window = res.intervals[6:10]
    expected = 8 * sum(iv.bytes["down"] for iv in window) / sum(iv.seconds for iv in window)
    assert goodput_by_way(res, 9, 4) == {"down": pytest.approx(expected)}
    # The load filled the 20 Mbit/s link: its payload rate is 20 x 1448 / 1514 = 19.13.
    assert 17e6 < expected < 19.2e6


def test_the_parser_names_the_line_of_bad_output_and_keeps_a_cut_one() -> None:
    text = FIFO.read_text()
    with pytest.raises(ToolOutputError, match="first line is not its header"):
        rpm_client.parse('{"interval": 0}\n')
    with pytest.raises(ToolOutputError, match="line 2: tcp_ms is not a number"):
        rpm_client.parse(text.splitlines()[0] + '\n{"foreign": 0, "t": 1, "tcp_ms": "x"}\n')
    with pytest.raises(ToolOutputError, match="no output"):
        rpm_client.parse("")
    cut = rpm_client.parse(text[:text.rindex("{")] + '{"interval": 10, "t"')
    assert cut.done is None and len(cut.intervals) == 10


def test_a_configuration_document_is_the_drafts_or_ignored() -> None:
    urls = rpm_server.urls("10.0.0.2", 4043)
    doc: dict[str, object] = {"version": 1, "urls": urls}
    assert rpm_client.nq_urls(doc)["small_download_url"] == "https://10.0.0.2:4043/small"
    with pytest.raises(ValueError, match="version 1"):
        rpm_client.nq_urls({**doc, "version": 2})
    other = {**urls, "upload_url": "https://10.0.0.3:4043/upload"}
    with pytest.raises(ValueError, match="one host"):
        rpm_client.nq_urls({"version": 1, "urls": other})
    assert rpm_server.urls("fd00::2", 443)["upload_url"] == "https://[fd00::2]:443/upload"


def test_the_servers_certificate_names_its_address() -> None:
    from cryptography import x509

    cert, key = rpm_server.self_signed("10.9.0.2")
    san = x509.load_pem_x509_certificate(cert).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["10.9.0.2"]
    assert b"PRIVATE KEY" in key


def _load(tmp_path: Path, keys: str) -> list[Test]:
    (tmp_path / "lab.toml").write_text(chain3("c"))
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n[[tests]]\nname = "rpm"\nkind = "responsiveness"\n'
                    'from = "client"\nto = "server"\n' + keys)
    return [t for v in load_experiment(path).variants for t in v.tests]


def test_a_responsiveness_test_loads_with_the_drafts_defaults(tmp_path: Path) -> None:
    (test,) = _load(tmp_path, "")
    (flow,) = test.flows
    assert (flow.kind, flow.src, flow.dst, flow.duration_s, flow.family) == (
        "responsiveness", "client", "server", 20.0, 4)
    assert flow.options_as(RpmOptions) == RpmOptions(direction="both", congestion=None)
    (test,) = _load(tmp_path, 'direction = "up"\ncongestion = "cubic"\nduration = "8s"\n')
    assert test.flows[0].options_as(RpmOptions) == RpmOptions("up", "cubic")
    assert test.flows[0].duration_s == 8.0


@pytest.mark.parametrize(("keys", "message"), [
    ('direction = "sideways"', r"tests\[0\]\.direction"),
    ('duration = "1s"', r"tests\[0\]\.duration.*2s to 10min"),
    ('congestion = "Cubic!"', r"tests\[0\]\.congestion"),
    ('flows = 2', r"tests\[0\]\.flows.*unknown key"),
])
def test_bad_options_name_their_key(tmp_path: Path, keys: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _load(tmp_path, keys + "\n")


def test_the_client_is_told_the_plan() -> None:
    plan = rpm_client.Plan("https://10.0.0.2:4043/.well-known/nq", 8.0, "up", "cubic")
    assert rpm_client.argv("/py", plan) == [
        "/py", "-m", "hoplab.tools.rpm_client", "https://10.0.0.2:4043/.well-known/nq",
        "--duration", "8", "--direction", "up", "--congestion", "cubic"]
    with pytest.raises(ValueError):
        rpm_client.argv("/py", rpm_client.Plan(plan.config_url, 8.0, "bidir"))


def test_nginx_accepts_the_servers_configuration(tmp_path: Path) -> None:
    # nginx's own check of the files as they are written for a run (it opens no socket).
    files = rpm_server.files(PurePosixPath(tmp_path), "10.1.2.3", 4043, ipv6=False)
    write_local(tmp_path, files)
    conf = files[rpm_server.CONFIG].decode()
    assert "listen 0.0.0.0:4043 ssl http2;" in conf and "proxy_request_buffering off;" in conf
    done = subprocess.run(["nginx", "-t", "-p", f"{tmp_path}/", "-c",
                           str(tmp_path / rpm_server.CONFIG), "-e", "stderr"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    v6 = rpm_server.config(PurePosixPath(tmp_path), 4043, ipv6=True)
    assert "listen [::]:4043 ipv6only=on ssl http2;" in v6
