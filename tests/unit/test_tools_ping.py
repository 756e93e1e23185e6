"""ping adapter: argv builder and parser on real iputils 20221126 captures (tests/data/ping)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from hoplab.tools import ToolOutputError, ping

DATA = Path(__file__).parent.parent / "data" / "ping"


def load(name: str) -> ping.Result:
    return ping.parse((DATA / name).read_text())


def test_argv() -> None:
    assert ping.argv(ping.Stream("127.0.0.1", count=10, tos=0x10)) == [
        "ping", "-4", "-D", "-n", "-O", "-i", "0.2", "-s", "56", "-c", "10", "-W", "5",
        "-Q", "0x10", "127.0.0.1"]
    # A duration is sent as a count (the probes leaving in [0, 5 s)), never as -w: at a
    # deadline ping counts the probes still in flight as lost.
    assert ping.argv(ping.Stream("::1", interval_s=0.05, duration_s=5, size=100, ipv6=True)) == [
        "ping", "-6", "-D", "-n", "-O", "-i", "0.05", "-s", "100", "-c", "100", "-W", "5", "::1"]


@pytest.mark.parametrize(("duration", "interval", "probes"), [
    (5.0, 0.2, 25), (5.0, 0.3, 17), (4.0, 0.05, 80), (0.1, 0.2, 1), (10.0, 1.0, 10)])
def test_probes_in_a_duration(duration: float, interval: float, probes: int) -> None:
    assert ping.probes_in(duration, interval) == probes


@pytest.mark.parametrize("stream", [
    ping.Stream("127.0.0.1"),  # never ends
    ping.Stream("127.0.0.1", count=5, duration_s=1.0),  # which one?
    ping.Stream("127.0.0.1", duration_s=0.0),
    ping.Stream("127.0.0.1", count=1, size=8),  # no timing in replies
    ping.Stream("127.0.0.1", count=1, ipv6=True),
])
def test_argv_rejects(stream: ping.Stream) -> None:
    with pytest.raises(ValueError, match=r"ping"):
        ping.argv(stream)


@pytest.mark.parametrize(("name", "host"),
                         [("loopback_v4.txt", "127.0.0.1"), ("loopback_v6.txt", "::1")])
def test_loopback(name: str, host: str) -> None:
    r = load(name)
    assert (r.host, r.sent, r.received, r.loss_pct) == (host, 10, 10, 0.0)
    assert [x.seq for x in r.replies] == list(range(1, 11))
    assert all(x.ttl == 64 and not x.t_estimated for x in r.replies)
    steps = [b.t_unix - a.t_unix for a, b in zip(r.replies, r.replies[1:], strict=False)]
    assert all(0.19 < s < 0.22 for s in steps)


def test_loopback_v4_values() -> None:
    r = load("loopback_v4.txt")
    assert r.replies[0].rtt_s == pytest.approx(0.041e-3)
    assert r.replies[0].t_unix == pytest.approx(1795351201.040504 - 0.041e-3)
    assert (r.rtt_min_s, r.rtt_avg_s, r.rtt_max_s, r.rtt_mdev_s) == pytest.approx(
        (0.041e-3, 0.049e-3, 0.055e-3, 0.003e-3))


def test_loss_no_answer_lines() -> None:
    r = load("loss_v4.txt")
    assert (r.sent, r.received, r.loss_pct) == (20, 16, 20.0)
    lost = [x for x in r.replies if x.rtt_s is None]
    assert [x.seq for x in lost] == [1, 6, 11, 16]
    assert all(x.t_estimated and x.ttl is None for x in lost)
    # seq 6 was sent between 5 and 7
    assert r.replies[4].t_unix < lost[1].t_unix < r.replies[6].t_unix
    assert r.replies[1].t_unix - lost[0].t_unix == pytest.approx(0.204, abs=0.01)


def test_late_reply_and_duplicate_count_once() -> None:
    r = load("late_dup_v4.txt")
    assert (r.sent, r.received, r.duplicates, r.loss_pct) == (10, 9, 1, 10.0)
    assert len(r.replies) == 10
    assert r.replies[2].rtt_s == pytest.approx(0.501)  # answered after "no answer yet"
    assert r.replies[4].rtt_s == pytest.approx(0.679e-3)  # the first, not the DUP!
    assert [x.seq for x in r.replies if x.rtt_s is None] == [7]
    assert r.rtt_max_s == pytest.approx(0.501006)


def test_all_lost() -> None:
    r = load("all_lost_v4.txt")
    assert (r.sent, r.received, r.loss_pct, r.rtt_avg_s) == (5, 0, 100.0, None)
    assert all(x.rtt_s is None for x in r.replies)
    steps = [b.t_unix - a.t_unix for a, b in zip(r.replies, r.replies[1:], strict=False)]
    assert steps == pytest.approx([0.204] * 4, abs=0.01)


def test_truncated_raises() -> None:
    text = (DATA / "loss_v4.txt").read_text()
    with pytest.raises(ToolOutputError, match=r"^ping: no statistics summary"):
        ping.parse(text[: text.index("---")])


def test_inconsistent_summary_raises() -> None:
    text = (DATA / "loss_v4.txt").read_text().replace("16 received", "17 received")
    with pytest.raises(ToolOutputError, match=r"ping: summary says 17 of 20 answered"):
        ping.parse(text)


def test_deadline_counted_probes_in_flight_as_lost() -> None:
    # The old argv (-w 5, no count) on a link with 400 ms each way: ping stopped at its
    # deadline with the last 4 probes in flight and reported them lost.
    r = load("wire400_deadline_v4.txt")
    assert (r.sent, r.received, r.loss_pct) == (25, 21, 16.0)
    assert [x.seq for x in r.replies if x.rtt_s is None] == [22, 23, 24, 25]


def test_count_waits_for_replies_in_flight() -> None:
    # The same link with the argv hoplab now builds for 5 s at 0.2 s (-c 25 -W 5): every
    # probe in flight when the last one left was waited for; none was lost.
    r = load("wire400_v4.txt")
    assert (r.sent, r.received, r.loss_pct) == (25, 25, 0.0)
    assert all(0.8 <= (x.rtt_s or 0) < 0.81 for x in r.replies)
    assert r.replies[-1].t_unix - r.replies[0].t_unix == pytest.approx(4.8, abs=0.1)


def test_count_with_loss_waits_twice_the_largest_rtt() -> None:
    # 20 % loss on the same link: the last probe was lost, so ping waited for it (2 x the
    # largest RTT) and then counted it lost; the 7 lost probes are real losses.
    r = load("wire400_loss_last_v4.txt")
    assert (r.sent, r.received, r.loss_pct) == (25, 18, 28.0)
    lost = [x for x in r.replies if x.rtt_s is None]
    assert len(lost) == 7 and lost[-1].seq == 25 and all(x.t_estimated for x in lost)
    assert lost[-1].t_unix - r.replies[23].t_unix == pytest.approx(0.2, abs=0.02)


# A real run of 70,000 probes across a lossy wire link (5 % loss, 2 ms each way) wraps
# icmp_seq once. The capture keeps its header, the lines of probes 65,400 to 65,636 (printed
# 65400..65535, 0..100) and its statistics; the other probes are generated in the formats of
# those lines, with losses that make the statistics add up.
_CAPTURED_LOST = [65404, 65451, 65454, 65464, 65468, 65529, 65534, 65558, 65608, 65636]
_LINE = re.compile(r"^\[([\d.]+)\] (.*icmp_seq=)(\d+)( ttl=\d+ time=)([\d.]+)( ms)$")


def _long_wrapping_output() -> tuple[str, set[int]]:
    lines = (DATA / "wrap_excerpt_v4.txt").read_text().splitlines()
    header, excerpt, summary = lines[0], lines[1:-4], lines[-4:]
    first = _LINE.match(excerpt[0])
    assert first is not None and first[3] == "65400"
    no_answer = next(x for x in excerpt if "no answer yet" in x)
    no_answer_fmt = no_answer[no_answer.index("]") + 2:no_answer.index("=") + 1]
    sent0 = float(first[1]) - float(first[5]) / 1000  # probe 65400 left then
    step, rtt_ms = 0.005032, 4.15  # the run's mean gap between probes and its typical RTT
    generated = [*range(1, 65400), *range(65637, 70001)]
    lost = set(generated[::20][:70000 - 66507 - len(_CAPTURED_LOST)])

    def probe_lines(seqs: list[int]) -> list[str]:
        out = []
        for seq in seqs:
            sent = sent0 + (seq - 65400) * step
            if seq in lost:
                out.append(f"[{sent + step:.6f}] {no_answer_fmt}{seq % 65536}")
            else:
                out.append(f"[{sent + rtt_ms / 1000:.6f}] {first[2]}{seq % 65536}{first[4]}"
                           f"{rtt_ms:.2f}{first[6]}")
        return out

    text = "\n".join([header, *probe_lines(generated[:65399]), *excerpt,
                      *probe_lines(generated[65399:]), *summary]) + "\n"
    return text, lost | set(_CAPTURED_LOST)


def test_sequence_numbers_wrap_after_65535() -> None:
    text, lost = _long_wrapping_output()
    assert "icmp_seq=65535 " in text and "icmp_seq=0 " in text
    r = ping.parse(text)
    assert (r.sent, r.received, r.loss_pct) == (70000, 66507, 4.99)
    assert [x.seq for x in r.replies] == list(range(1, 70001))
    assert {x.seq for x in r.replies if x.rtt_s is None} == lost
    # Probe 65,536 was printed as icmp_seq=0; its reply is the captured one.
    wrapped = r.replies[65535]
    assert wrapped.rtt_s == pytest.approx(4.15e-3)
    assert wrapped.t_unix == pytest.approx(1795429820.774006 - 4.15e-3)
    # A late reply in the captured part lands on its own probe, not one 65,536 away.
    assert r.replies[65496].rtt_s == pytest.approx(6.55e-3)
    # Every probe's send time, answered or placed between its neighbours, in order.
    times = [x.t_unix for x in r.replies]
    assert all(b > a for a, b in itertools.pairwise(times))
