"""hoplab-gen's adapter (hoplab.tools.hoplab_gen): its argv and its reports, parsed from
real outputs captured from the program (tests/data/hoplab_gen)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.tools import ToolOutputError, hoplab_gen

DATA = Path(__file__).resolve().parents[1] / "data" / "hoplab_gen"


def test_a_paced_send_names_its_rate_and_count():
    argv = hoplab_gen.send_argv("/x/hoplab-gen", "fd00::2", 5201, 18, flows=4,
                                fps=20_889.25, frames=41_779)
    assert argv[:2] == ["/x/hoplab-gen", "send"]
    pairs = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert pairs == {"--dst": "fd00::2", "--port": "5201", "--payload": "18",
                     "--flows": "4", "--rate": "20889.250", "--count": "41779"}
    unpaced = hoplab_gen.send_argv("hoplab-gen", "10.0.0.2", 9, 18, seconds=1.0)
    assert "--rate" not in unpaced and unpaced[-2:] == ["--seconds", "1"]
    with pytest.raises(ValueError):
        hoplab_gen.send_argv("hoplab-gen", "10.0.0.2", 9, 18)


def test_the_fast_path_goes_past_the_qdisc_only_when_asked():
    link = hoplab_gen.Link("eth0", "10.0.0.1", "02:00:00:00:00:01", "02:00:00:00:00:02")
    through = hoplab_gen.send_argv("g", "10.0.0.2", 9, 18, seconds=1.0, link=link)
    assert "--qdisc" not in through
    around = hoplab_gen.send_argv("g", "10.0.0.2", 9, 18, seconds=1.0, link=link,
                                  around_qdisc=True)
    assert around[-2:] == ["--qdisc", "around"]
    # UDP sockets have no way past it: the option is not given.
    udp = hoplab_gen.send_argv("g", "10.0.0.2", 9, 18, seconds=1.0, around_qdisc=True)
    assert "--qdisc" not in udp


def test_what_a_send_reports():
    # An older report, before it kept its stalls: none.
    frames, seconds, stalled = hoplab_gen.sent(
        (DATA / "send-64B-1000-at-1000fps.json").read_text())
    assert (frames, seconds, stalled) == (1000, 1.014839521, 0.0)
    # 20,000 frames/s for 2 s, stopped (SIGSTOP) for 100 ms half a second in: 2,454
    # frames short (122.7 ms of its rate), 115.8 ms of that in stalls.
    got = hoplab_gen.sent((DATA / "send-20000fps-2s-stopped-100ms.json").read_text())
    assert got == (37_546, 2.000048238, 0.115830694)
    assert 0.100 <= got.stalled_s <= (20_000 * 2.000048238 - 37_546) / 20_000
    with pytest.raises(ToolOutputError, match="hoplab-gen"):
        hoplab_gen.sent((DATA / "send-bad.txt").read_text())
    with pytest.raises(ToolOutputError, match="stalled"):
        hoplab_gen.sent('{"sent": 10, "seconds": 1.0, "stalled": 2.0}')


def test_what_a_receiver_reports():
    got = hoplab_gen.received((DATA / "recv-127.0.0.1-1000.json").read_text())
    assert (got.frames, got.out_of_order) == (1000, 0)
    assert (got.median_us, got.p99_us, got.max_us) == (4.5, 7.5, 22.643)
    none = hoplab_gen.received((DATA / "recv-nothing.json").read_text())
    assert none.frames == 0 and none.median_us is None


def test_the_binary_is_found_where_setup_puts_it(tmp_path, monkeypatch):
    exe = tmp_path / "hoplab-gen"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("HOPLAB_GEN", str(exe))
    assert hoplab_gen.binary() == exe
