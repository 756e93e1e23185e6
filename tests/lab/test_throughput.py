"""RFC 2544 throughput (`kind = "throughput"`), known answers through shaped links.

A frame of S bytes by RFC 2544 (FCS included) is S - 4 bytes to Linux, and HTB counts
those: through R bit/s the path forwards R / ((S - 4) x 8) frames a second. A trial of T
seconds at a rate above that still loses nothing while the excess fits what the path can
hold: HTB's full bucket (hoplab.lab.shaping.burst_bytes, passed at once) and the queue
of Q frames behind it. So the no-drop rate a search finds with trials of T seconds is

    R / ((S - 4) x 8) + (burst / (S - 4) + Q) / T,

the second term being what short trials overstate (docs/kinds.md). The searches here
stop at 0.5 % precision, below the answer; the bound is 1 %, and a header slip (counting
the FCS, or 1514 for 1518 frames) moves the answer by 0.3 % at 1518 bytes and by 6.7 % at
64: the 64-byte answer is the one that tells the headers apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.lab.shaping import burst_bytes
from tests.helpers.lab import new_lab_name, one_ok_run

pytestmark = [pytest.mark.root, pytest.mark.alone, pytest.mark.slow]

# 1 s trials: a search's time is its trials', 3.1 s each at 2 s with the drain (these
# four tests took 30 to 62 s each in fresh-clone runs at 2 s; 7 to 40 s at 1 s, also with
# a busy loop on one core). The queue's and bucket's share of the answer doubles, and is
# computed as before.
TRIAL_S = 1.0


def _lab(name: str, link: str) -> str:
    return (f'name = "{name}"\n[addressing]\nipv6 = false\n[nodes.client]\n[nodes.r]\n'
            f'[nodes.server]\n[[links]]\nbetween = ["client", "r"]\n'
            f'[[links]]\nbetween = ["r", "server"]\n{link}\n')


def _experiment(sizes: list[int], precision: str = "0.5%") -> str:
    return (f'lab = "lab.toml"\n[[tests]]\nname = "ndr"\nkind = "throughput"\n'
            f'from = "client"\nto = "server"\nframe_sizes = {sizes}\n'
            f'trial = "{TRIAL_S:g}s"\ndrain = "0.5s"\nprecision = "{precision}"\n')


def _run(tmp_path: Path, link: str, sizes: list[int], precision: str = "0.5%",
         trials: int = 2) -> dict[str, dict[str, float]]:
    """{frame size: {metric: value}} of one run."""
    name = new_lab_name()
    (tmp_path / "lab.toml").write_text(_lab(name, link))
    (tmp_path / "exp.toml").write_text(_experiment(sizes, precision))
    rec = one_ok_run(tmp_path, name, timeout=600)
    out: dict[str, dict[str, float]] = {}
    for m in rec.metrics:
        if m.key is not None and m.flow is None and m.node is None:
            out.setdefault(m.key, {})[m.name] = m.value
    series = {(s.name, s.key): s for s in rec.series}
    for size in sizes:
        asked = series["throughput_trial", str(size)].v
        achieved = series["throughput_trial_achieved", str(size)].v
        assert len(asked) >= trials, "every answer rests on trials"
        assert len(achieved) == len(asked), "the achieved rate beside every asked one"
    for m in rec.metrics:
        if m.name == "invalid_trials":
            assert m.value >= 0 and m.unit == "count"
    return out


def _expected(rate_bps: int, size: int, queue: int) -> float:
    frame = size - 4
    return rate_bps / (frame * 8) + (burst_bytes(rate_bps) / frame + queue) / TRIAL_S


def test_ndr_of_1518_byte_frames_through_50_mbit(tmp_path: Path) -> None:
    """The queue is 200 frames, not 20: with 20 (5 ms at this rate) a stall of the
    generator on this busy 2-core machine lost frames below the rate in 2 runs of 4 (a
    5-10 % loss at 930 frames/s of 4,128); 48 ms of queue absorbs what was seen."""
    got = _run(tmp_path, 'rate = "50mbit"\nqueue = 200', [1518])["1518"]
    want = _expected(50_000_000, 1518, 200)
    assert abs(got["ndr_fps"] / want - 1) <= 0.01, (got, want)
    assert got["ndr_bps"] == pytest.approx(got["ndr_fps"] * 1518 * 8)
    assert got["generator_limited"] == 0.0
    assert got["generator_fps"] > 2 * want


def test_ndr_of_64_byte_frames_through_10_mbit(tmp_path: Path) -> None:
    got = _run(tmp_path, 'rate = "10mbit"\nqueue = 1000', [64])["64"]
    want = _expected(10_000_000, 64, 1000)
    assert abs(got["ndr_fps"] / want - 1) <= 0.01, (got, want)


def test_a_frame_ceiling_in_the_wire_whatever_the_size(tmp_path: Path) -> None:
    """pps = 10000 on the wire: 10,000 frames/s of 64 and of 1518 bytes (the wire has no
    bucket; its queue of Q passes Q / T more). The queue is 2000 frames, 200 ms at this
    rate. 10,000, not 20,000: 1518-byte frames at 24,000 a second (290 Mbit/s through
    the wire's copies) stalled the generator in 5 trials of 7 while the hypervisor took
    5 to 10 % of a core, each stall followed by a wait for a quiet second, and the test
    took 137 s in a fresh-clone run and 207 s here; at 12,000 a second a search took 8
    to 12 s.

    The search's precision is 1 %, not 0.5 %: with a busy loop on one core, hoplab-gen
    fell 0.3 to 2.3 % short of 22,000 frames/s in this lab (it does not catch up a
    stall), so at 0.5 % most trials were invalid. The answer is the achieved rate of the
    highest lossless valid trial: at least want / (1 + p) asked (the next, failed, trial
    is within p above it) and achieved within p of that, so at least want x (1 - p) /
    (1 + p), 1.98 % below; never above want (N frames in T' >= T seconds pass only when
    N <= 10,000 T' + 2000), but for the frame in service."""
    got = _run(tmp_path, 'emulator = "wire"\npps = 10000\nqueue = 2000', [64, 1518],
               precision="1%")
    want = 10_000 + 2000 / TRIAL_S
    for size in ("64", "1518"):
        ratio = got[size]["ndr_fps"] / want
        assert (1 - 0.01) / (1 + 0.01) <= ratio <= 1.001, (size, got[size], want)


def test_a_path_faster_than_the_generator_is_generator_limited(tmp_path: Path) -> None:
    # The first trial, at the generator's own rate, loses nothing: it is the answer.
    got = _run(tmp_path, "", [1518], precision="5%", trials=1)["1518"]
    assert got["generator_limited"] == 1.0
    # The NDR is the rate achieved in the trial at the ceiling: within the precision.
    assert got["generator_fps"] * 0.95 <= got["ndr_fps"] <= got["generator_fps"] * 1.001
