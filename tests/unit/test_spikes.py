"""Latency spikes and their period (hoplab.analysis.spikes), on known answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hoplab.analysis.spikes import find_period, find_spikes, spike_figures
from hoplab.record import Metric, RunRecord, Series
from hoplab.render.spike_text import spike_lines, spike_marks
from hoplab.tools import ping

DATA = Path(__file__).parent.parent / "data" / "ping"


def _series(seed: int, span: float = 60.0, dt: float = 0.2, base: float = 20.0,
            noise: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, span, dt)
    return t, base + rng.normal(0.0, noise, len(t)), rng


def _add(t: np.ndarray, v: np.ndarray, start: float, length: float, height: float) -> None:
    v[(t >= start) & (t < start + length)] += height


def test_spikes_on_a_5_s_grid_give_a_period_of_5_s() -> None:
    # SFQ's perturb = 5: a spike every 5 s, its onset a little late or early.
    t, v, rng = _series(1)
    onsets = [5 * k + 0.3 + float(rng.normal(0, 0.05)) for k in range(1, 12)]
    for s in onsets:
        _add(t, v, s, 0.6, 80.0)
    report = find_spikes(t, v)
    assert report.count == 11
    # Each spike's onset is the first 0.2 s sample at or after the true one.
    for spike, s in zip(report.spikes, onsets, strict=True):
        assert s - 1e-9 <= spike.start < s + 0.2
        assert spike.size_ms == pytest.approx(80.0, abs=5)
    assert report.period is not None
    assert report.period.period_s == pytest.approx(5.0, abs=0.2)
    assert report.period.confidence > 0.99
    assert report.period.on_grid == 11


def test_a_period_with_missing_beats_and_jitter_is_still_found() -> None:
    # 20 s perturb over 200 s; 2 of 10 beats show no spike; onsets jitter 0.2 s.
    t, v, rng = _series(2, span=200.0)
    for k in (1, 2, 3, 5, 6, 7, 8, 9):
        _add(t, v, 20 * k + float(rng.normal(0, 0.2)), 0.8, 150.0)
    report = find_spikes(t, v)
    assert report.count == 8
    assert report.period is not None
    assert report.period.period_s == pytest.approx(20.0, abs=0.5)
    assert report.period.on_grid == 8 and report.period.cycles == 9


def test_too_few_beats_are_not_called_a_period() -> None:
    # Four spikes on a 20 s grid in 130 s: 127 periods could be tried in that span, and
    # one of them fitting four points is likely by chance (p 0.97 after the correction).
    t, v, rng = _series(2, span=130.0)
    for k in (1, 2, 4, 6):
        _add(t, v, 20 * k + float(rng.normal(0, 0.2)), 0.8, 150.0)
    report = find_spikes(t, v)
    assert report.count == 4 and report.period is None


def test_spikes_at_random_times_have_no_period() -> None:
    found = 0
    for seed in range(100):
        t, v, rng = _series(100 + seed)
        for s in rng.uniform(0, 59, int(rng.integers(4, 15))):
            _add(t, v, float(s), 0.4, 80.0)
        found += find_spikes(t, v).period is not None
    assert found <= 1


def test_pure_noise_has_no_spikes_and_no_period() -> None:
    counts = [find_spikes(*_series(300 + seed)[:2]).count for seed in range(50)]
    assert sum(counts) == 0


def test_a_change_of_level_is_not_a_spike() -> None:
    # rrul: idle at 20 ms, then 20 s of load at 200 ms, then idle again.
    t, v, _ = _series(3, span=40.0)
    _add(t, v, 10.0, 20.0, 180.0)
    report = find_spikes(t, v)
    assert report.count == 0


def test_a_spike_during_the_load_phase_is_relative_to_the_load_baseline() -> None:
    t, v, _ = _series(4, span=40.0)
    _add(t, v, 10.0, 20.0, 180.0)
    _add(t, v, 20.0, 0.4, 150.0)
    report = find_spikes(t, v)
    assert report.count == 1
    assert report.spikes[0].start == pytest.approx(20.0, abs=0.2)
    assert report.spikes[0].size_ms == pytest.approx(150.0, abs=10)


def test_a_cluster_of_spikes_is_not_a_period() -> None:
    # Twelve spikes 2 s apart, then nothing for 36 s: over their eleven cycles they recur.
    t, v, _ = _series(5)
    for k in range(12):
        _add(t, v, 2.0 + 2 * k, 0.4, 80.0)
    report = find_spikes(t, v)
    assert report.period is not None and report.period.period_s == pytest.approx(2.0, abs=0.1)
    # Four spikes spread as two pairs (5, 6.2 s and 40, 41.2 s) do not make a period.
    t, v, _ = _series(6)
    for s in (5.0, 6.2, 40.0, 41.2):
        _add(t, v, s, 0.4, 80.0)
    assert find_spikes(t, v).period is None


def test_too_few_spikes_for_a_period() -> None:
    assert find_period([5.0, 10.0, 15.0], 0.0, 60.0, 0.2) is None


def test_a_real_ping_capture_without_spikes() -> None:
    # 400 ms each way through hoplab-wire: a steady delay, no spike.
    res = ping.parse((DATA / "wire400_v4.txt").read_text(), interval_s=0.2)
    answered = [r for r in res.replies if r.rtt_s is not None]
    t = [r.t_unix for r in answered]
    v = [(r.rtt_s or 0.0) * 1000 for r in answered]
    rtt = Series("rtt", "ms", t, v, flow="p")
    metrics, series = spike_figures(rtt)
    assert [(m.name, m.value) for m in metrics] == [("spikes", 0.0)]
    assert series == []


def test_figures_lines_and_marks() -> None:
    t, v, _ = _series(7)
    for k in range(1, 12):
        _add(t, v, 5.0 * k, 0.6, 80.0)
    rtt = Series("rtt", "ms", list(t), list(v), flow="ping1")
    metrics, series = spike_figures(rtt)
    got = {m.name: m for m in metrics}
    assert got["spikes"].value == 11 and got["spikes"].flow == "ping1"
    assert got["spike_period"].value == pytest.approx(5.0, abs=0.01)
    assert got["spike_max"].value == pytest.approx(80.0, abs=5)
    (onsets,) = series
    assert onsets.name == "rtt_spike" and len(onsets.t) == 11
    xs, ys = spike_marks(rtt, onsets)
    assert xs == onsets.t and all(y > 90 for y in ys)
    rec = RunRecord("e", "t", "ping", 1, {}, {}, 0.0, metrics=[
        *metrics, Metric("spikes", 0.0, "count", flow="quiet")], series=[rtt, *series])
    lines = spike_lines(rec)
    assert lines[0].startswith("ping1: 11 spikes, largest +8")
    assert "at 5.0, 10.0, 15.0" in lines[0]
    assert "recurring every 5.00 s" in lines[0]
    assert lines[1] == "quiet: no spikes above its baseline"


def _sfq_capture() -> tuple[list[float], list[float]]:
    # A real 40 s ping through hoplab-wire's sfq, perturb = 5 s, next to two floods; the
    # wire's 5 s grid began at this epoch (tests/data/README.md).
    origin = 1795439080.593666
    text = (DATA.parent / "spikes" / "sfq_perturb5_ping_v4.txt").read_text()
    answered = [r for r in ping.parse(text, interval_s=0.05).replies if r.rtt_s is not None]
    return ([r.t_unix - origin for r in answered],
            [(r.rtt_s or 0.0) * 1000 for r in answered])


def test_sfq_rehash_level_shifts_land_on_the_grid() -> None:
    t, v = _sfq_capture()
    report = find_spikes(t, v)
    # The ping's flow moved into a flood's slot at 5 s and 25 s and out at 15 s and 40 s.
    assert [round(s.at / 5) * 5 for s in report.shifts] == [5, 15, 25, 40]
    for s in report.shifts:
        assert abs(s.at - round(s.at / 5) * 5) <= 0.2
        assert abs(s.after_ms - s.before_ms) == pytest.approx(144, abs=4)
    # The end of a plateau is a level shift, not a spike above the level it left.
    assert all(sp.size_ms < 45 for sp in report.spikes)
    # Four moves in 40 s could be on any grid by chance: no period is claimed.
    assert report.period is None


def test_plateaus_on_a_grid_give_its_period() -> None:
    # SFQ-like: every 5 s the level may change (to 145 ms or back to 1 ms), and does on
    # 12 of 24 rehashes; each change lands within 60 ms of the grid.
    t, v, rng = _series(8, span=120.0, dt=0.05, base=1.0, noise=0.2)
    high = False
    changes = 0
    for k in range(1, 24):
        if rng.random() < 0.5 or changes < 2 * k // 4:
            high = not high
            changes += 1
        start = 5 * k + float(rng.normal(0, 0.03))
        if high:
            _add(t, v, start, 5.0, 144.0)
    report = find_spikes(t, v)
    assert len(report.shifts) == changes
    assert report.period is not None
    assert report.period.period_s == pytest.approx(5.0, abs=0.2)


def test_a_short_excursion_is_a_spike_not_two_levels() -> None:
    t, v, _ = _series(9, span=30.0)
    _add(t, v, 10.0, 1.2, 100.0)
    report = find_spikes(t, v)
    assert report.shifts == ()
    assert report.count == 1 and report.spikes[0].start == pytest.approx(10.0, abs=0.2)


def test_sfq_perturb_5_gives_a_period_of_5_s_on_a_real_two_minute_capture() -> None:
    # hoplab run of examples/sfq-perturb.toml's p5 variant for 120 s (seed 004's SFQ
    # experiment): the ping's RTT moved between ~1 and ~145 ms twelve times, on the grid.
    text = (DATA.parent / "spikes" / "sfq_perturb5_120s_ping_v4.txt").read_text()
    answered = [r for r in ping.parse(text, interval_s=0.05).replies if r.rtt_s is not None]
    t0 = answered[0].t_unix
    t = [r.t_unix - t0 for r in answered]
    v = [(r.rtt_s or 0.0) * 1000 for r in answered]
    report = find_spikes(t, v)
    assert len(report.shifts) == 12
    assert report.period is not None
    assert report.period.period_s == pytest.approx(5.0, abs=0.2)
    assert report.period.confidence > 0.999
    # Every level shift but the last (the floods ended at 120 s) lies on the fitted grid,
    # within 0.2 s.
    assert report.shifts[-1].at == pytest.approx(120, abs=0.5)
    for s in report.shifts[:-1]:
        k = round((s.at - report.period.phase_s) / report.period.period_s)
        assert abs(s.at - report.period.phase_s - k * report.period.period_s) <= 0.2
    # The same series cut to its first 40 s has four shifts: too few to call a period.
    cut = [i for i, x in enumerate(t) if x < 40]
    assert find_spikes([t[i] for i in cut], [v[i] for i in cut]).period is None
