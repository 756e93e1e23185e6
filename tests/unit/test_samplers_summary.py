"""sampler_metrics and counter_delta on constructed series with known answers."""

from __future__ import annotations

import pytest

from hoplab.record import Metric, Series
from hoplab.samplers.summary import counter_delta, sampler_metrics


def ticks(n: int, step: float = 0.1, start: float = 0.0) -> list[float]:
    return [round(start + i * step, 6) for i in range(n)]


def by_name(metrics: list[Metric]) -> dict[tuple[str, str | None, str | None], float]:
    return {(m.name, m.node, m.key): m.value for m in metrics}


def test_rising_counter_rate() -> None:
    # 1000 bytes every 0.1 s: 10 kB/s = 80 kbit/s.
    s = Series("iface.tx_bytes", "bytes", ticks(21), [1000.0 * i for i in range(21)],
               node="r1", key="eth1")
    assert counter_delta(s) == pytest.approx(20000)
    got = by_name(sampler_metrics([s]))
    assert got[("iface.tx_bytes", "r1", "eth1")] == pytest.approx(20000)
    assert got[("iface.tx_bps", "r1", "eth1")] == pytest.approx(80_000)


def test_window_limits_the_delta() -> None:
    s = Series("iface.rx_packets", "packets", ticks(21), [10.0 * i for i in range(21)],
               node="r1", key="eth0")
    # Samples at 0.5 .. 1.5 s: 11 samples, 10 intervals of 10 packets.
    assert counter_delta(s, (0.5, 1.5)) == pytest.approx(100)
    got = by_name(sampler_metrics([s], window=(0.5, 1.5)))
    assert got[("iface.rx_pps", "r1", "eth0")] == pytest.approx(100)
    assert counter_delta(s, (5.0, 6.0)) == 0.0
    assert sampler_metrics([s], window=(5.0, 6.0)) == []


def test_32_bit_wrap() -> None:
    top = 2**32 - 500
    s = Series("qdisc.drops", "packets", ticks(3), [top - 500, top, 700.0])
    # 500, then 500 up to the wrap and 700 after it.
    assert counter_delta(s) == pytest.approx(500 + 500 + 700)


def test_64_bit_wrap() -> None:
    # Series hold floats, exact near 2**64 only to 2**11; 2**20 below the top is exact.
    s = Series("iface.tx_bytes", "bytes", ticks(3), [2.0**64 - 2**21, 2.0**64 - 2**20, 1000.0])
    assert counter_delta(s) == pytest.approx(2**20 + 2**20 + 1000)


def test_reset_in_the_upper_range_is_not_a_32_bit_wrap() -> None:
    # A qdisc replaced while its 32-bit byte counter stood at 3.5e9 (0.8e9 below the
    # top): read as a wrap, that would be 0.8e9 bytes in 0.1 s from a counter rising
    # 1000 per 0.1 s. The 300 and 500 after the reset are kept.
    s = Series("qdisc.sent_bytes", "bytes", ticks(4), [3.5e9 - 1000, 3.5e9, 300.0, 800.0])
    assert counter_delta(s) == pytest.approx(1000 + 300 + 500)


def test_reset_just_below_the_top_is_told_by_the_rate() -> None:
    # 64-bit interface counters (Linux's) also fall only on a reset; 2**32 - 2e6 is near
    # the 32-bit top in bytes but 200 intervals away at this counter's 10 kB per 0.1 s.
    top = 2.0**32
    s = Series("iface.rx_bytes", "bytes", ticks(4), [top - 2e6 - 1e4, top - 2e6, 4000.0, 14000.0])
    assert counter_delta(s) == pytest.approx(1e4 + 4000 + 1e4)
    # The same fall from 2e4 below the top is two intervals' worth: a genuine wrap.
    w = Series("iface.rx_bytes", "bytes", ticks(4), [top - 3e4, top - 2e4, 4000.0, 14000.0])
    assert counter_delta(w) == pytest.approx(1e4 + 2e4 + 4000 + 1e4)


def test_without_a_rate_only_a_fall_from_near_the_top_is_a_wrap() -> None:
    # Two samples give no rate: 5 below the top is a wrap, 1e9 below it a reset (which
    # the old rule, a rise of at most a quarter of the range, took for a wrap too).
    wrap = Series("qdisc.drops", "packets", ticks(2), [2.0**32 - 5, 3.0])
    assert counter_delta(wrap) == 8.0
    reset = Series("qdisc.drops", "packets", ticks(2), [2.0**32 - 1e9, 3.0])
    assert counter_delta(reset) == 3.0


def test_reset_counts_from_zero() -> None:
    # The interface was re-created between the 2nd and 3rd sample: what it counted
    # before the reset and after the 2nd sample is lost, the 300 after it are kept.
    s = Series("iface.tx_bytes", "bytes", ticks(4), [1_000_000.0, 1_000_500.0, 300.0, 800.0])
    assert counter_delta(s) == pytest.approx(500 + 300 + 500)


def test_single_sample_counter_is_left_out() -> None:
    s = Series("tcp.retrans_segs", "segments", [1.0], [5.0], node="r1")
    assert counter_delta(s) == 0.0
    assert sampler_metrics([s]) == []


def test_tcp_and_qdisc_metrics() -> None:
    key = "eth1 1: htb"
    series = [
        Series("tcp.retrans_segs", "segments", ticks(4), [3.0, 3.0, 7.0, 9.0], node="client"),
        Series("qdisc.drops", "packets", ticks(4), [0.0, 10.0, 25.0, 25.0], node="r1", key=key),
        Series("qdisc.overlimits", "packets", ticks(4), [5.0, 6.0, 8.0, 9.0], node="r1",
               key=key),
        Series("qdisc.backlog_bytes", "bytes", ticks(4), [0.0, 90_000.0, 150_000.0, 3000.0],
               node="r1", key=key),
        Series("qdisc.backlog_packets", "packets", ticks(4), [0.0, 60.0, 100.0, 2.0],
               node="r1", key=key),
    ]
    got = by_name(sampler_metrics(series))
    assert got[("tcp.retrans_segs", "client", None)] == 6
    assert got[("qdisc.drops", "r1", key)] == 25
    assert got[("qdisc.overlimits", "r1", key)] == 4
    assert got[("qdisc.backlog_bytes_max", "r1", key)] == 150_000
    assert got[("qdisc.backlog_packets_max", "r1", key)] == 100
    # Only the window's samples count for the maximum.
    windowed = by_name(sampler_metrics(series, window=(0.25, 0.35)))
    assert windowed[("qdisc.backlog_bytes_max", "r1", key)] == 3000


def test_cpu_mean_weights_by_interval() -> None:
    # In the window: half of (0.1, 0.2] at 10 %, then 0.1 s at 20 % and 0.2 s at 40 %:
    # (0.5 + 2 + 8) / 0.35 s.
    s = Series("cpu.softirq", "%", [0.1, 0.2, 0.3, 0.5], [10.0, 10.0, 20.0, 40.0],
               node="host", key="cpu0")
    [got] = sampler_metrics([s], window=(0.15, 0.6))
    assert (got.name, got.unit, got.node, got.key) == ("cpu.softirq", "%", "host", "cpu0")
    assert got.value == pytest.approx(30.0)
    # The first sample of a series is weighted like the interval after it.
    assert sampler_metrics([s])[0].value == pytest.approx((1 + 1 + 2 + 8) / 0.5)


def test_cpu_single_sample() -> None:
    s = Series("cpu.idle", "%", [0.1], [90.0], node="host", key="all")
    assert sampler_metrics([s])[0].value == pytest.approx(90.0)


def test_cpu_mean_leaves_out_the_interval_before_the_load() -> None:
    # Samples every 0.1 s; the load runs from 1.0 to 3.0 s at 50 %. The sample taken at
    # 1.0 s describes (0.9, 1.0], before the load: its 99 % must not count, nor the
    # sample at 3.1 s, which describes (3.0, 3.1].
    t = ticks(31, start=0.1)
    v = [99.0 if x <= 1.0 + 1e-9 or x > 3.0 + 1e-9 else 50.0 for x in t]
    s = Series("cpu.softirq", "%", t, v, node="host", key="all")
    [got] = sampler_metrics([s], window=(1.0, 3.0))
    assert got.value == pytest.approx(50.0)
    # A load phase that starts between samples takes the straddling interval's share.
    [part] = sampler_metrics([s], window=(0.95, 3.0))
    assert part.value == pytest.approx((99 * 0.05 + 50 * 2.0) / 2.05)


def test_a_device_samplers_own_cost_is_a_share_mean_not_a_counter() -> None:
    # sampler.cpu is each interval's share of one core, as cpu.* are: the mean over the
    # load phase, weighted by interval; differenced like a counter it would be 0.4 - 0.8.
    t = ticks(31, start=0.1)
    v = [5.0 if x <= 1.0 + 1e-9 else 0.8 if x <= 2.0 + 1e-9 else 0.4 for x in t]
    s = Series("sampler.cpu", "%", t, v, node="router")
    [got] = sampler_metrics([s], window=(1.0, 3.0))
    assert (got.name, got.unit, got.node, got.key) == ("sampler.cpu", "%", "router", None)
    assert got.value == pytest.approx((0.8 * 1.0 + 0.4 * 1.0) / 2.0)
