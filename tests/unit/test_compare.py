"""Statistics and verdicts of `hoplab compare`, on known answers."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hoplab.analysis.compare import MetricKey, compare_runs, parse_metric
from hoplab.analysis.groups import compare_groups
from hoplab.analysis.power import detectable_change, noise_cv
from hoplab.analysis.ranks import min_p as min_p_value
from hoplab.analysis.verdict_rule import bootstrap
from hoplab.errors import UsageError
from hoplab.metrics import better
from hoplab.record import MEASUREMENT_VERSION
from tests.helpers.runs import make_run, side


def _normal(mean: float, sd: float, n: int, seed: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).normal(mean, sd, n)]


def test_clearly_lower_goodput_is_worse_with_a_ci_around_the_true_change() -> None:
    a = side(_normal(100e6, 3e6, 10, seed=1))
    b = side(_normal(80e6, 3e6, 10, seed=2), start_id=11)
    (c,) = compare_runs(a, b, ["goodput"])
    assert c.verdict == "worse"
    assert c.ci_low_pct < -20 < c.ci_high_pct and c.ci_high_pct < 0
    assert c.p_value is not None and c.p_value < 0.001
    assert c.change_pct == pytest.approx(100 * (c.b_median - c.a_median) / c.a_median)
    assert c.unit == "bit/s" and len(c.a_values) == len(c.b_values) == 10


def test_no_difference_found_is_not_sameness_shown() -> None:
    # 3 % noise, 10 runs a side: the interval (-3.6 .. +3.5 %) reaches past the 2 %
    # margin, so "no change" is not shown, only not rejected; with it, the smallest
    # change these runs would have found 80 % of the time.
    va, vb = _normal(100e6, 3e6, 10, seed=3), _normal(100e6, 3e6, 10, seed=4)
    (c,) = compare_runs(side(va), side(vb, start_id=11), ["goodput"])
    assert c.verdict == "unclear"
    assert c.ci_low_pct < -2 and c.ci_high_pct > 2 and c.p_value == pytest.approx(0.796,
                                                                                   abs=1e-3)
    assert c.detectable_pct == pytest.approx(
        100 * detectable_change(noise_cv([va, vb]), 10, 10, alpha=0.05))
    assert 5 < c.detectable_pct < 7
    # A wider margin takes that interval as sameness; quieter runs show it at 2 %.
    wide = compare_runs(side(va), side(vb, start_id=11), ["goodput"], margin_pct=4.0)[0]
    assert wide.verdict == "same" and math.isnan(wide.detectable_pct)
    (quiet,) = compare_runs(side(_normal(100e6, 0.3e6, 10, seed=3)),
                            side(_normal(100e6, 0.3e6, 10, seed=4), start_id=11), ["goodput"])
    assert quiet.verdict == "same" and -0.4 < quiet.ci_low_pct < quiet.ci_high_pct < 0.4


def test_four_runs_a_side_with_one_overlap_show_no_clear_difference() -> None:
    # Issue 19's case: medians +3.0 %, interval +0.7 .. +5.0 %, p 0.057 was "same".
    va, vb = [99.2, 100.2, 100.6, 101.3], [103.9, 105.4, 102.9, 101.1]
    (c,) = compare_runs(side(va), side(vb, start_id=5), ["goodput"])
    assert round(c.change_pct, 1) == 3.0
    assert (round(c.ci_low_pct, 1), round(c.ci_high_pct, 1)) == (0.7, 5.0)
    assert c.p_value == pytest.approx(4 / 70)          # U = 1 of 16: 2 x 2 / C(8, 4)
    assert c.verdict == "unclear"
    # 1.4 % noise: 4 + 4 runs find a 3.9 % change 80 % of the time at p <= 0.05.
    assert noise_cv([va, vb]) == pytest.approx(0.0138, abs=1e-4)
    assert c.detectable_pct == pytest.approx(3.94, abs=0.01)


def test_one_run_per_side_gives_no_verdict_and_no_invented_spread() -> None:
    (c,) = compare_runs(side([100e6]), side([50e6], start_id=2), ["goodput"])
    assert c.verdict == "not enough data"
    assert c.p_value is None and math.isnan(c.ci_low_pct) and math.isnan(c.ci_high_pct)
    assert c.change_pct == pytest.approx(-50)


@pytest.mark.parametrize(("name", "a", "b", "verdict"), [
    ("rtt_median", [10, 11, 10.5, 10.2, 10.8], [20, 21, 20.5, 20.2, 20.8], "worse"),
    ("rtt_median", [20, 21, 20.5, 20.2, 20.8], [10, 11, 10.5, 10.2, 10.8], "better"),
    ("goodput", [10, 11, 10.5, 10.2, 10.8], [20, 21, 20.5, 20.2, 20.8], "better"),
    ("loss", [0, 0, 0, 0, 0], [5, 6, 5, 7, 5], "worse"),     # A's median 0: no % change
    ("packets", [10, 11, 10.5, 10.2, 10.8], [20, 21, 20.5, 20.2, 20.8], "n/a"),
])
def test_direction_decides_better_or_worse(name: str, a: list[float], b: list[float],
                                           verdict: str) -> None:
    (c,) = compare_runs(side(a, name), side(b, name, start_id=10), [name])
    assert c.verdict == verdict


def test_zero_baseline_has_no_percent_but_still_a_verdict() -> None:
    (c,) = compare_runs(side([0.0] * 5, "loss"), side([5, 6, 5, 7, 5], "loss", 10), ["loss"])
    assert math.isnan(c.change_pct) and math.isnan(c.ci_low_pct) and c.verdict == "worse"


def test_two_plus_two_can_never_reach_significance() -> None:
    a, b = side([100, 101], "goodput"), side([50, 51], "goodput", 3)
    (c,) = compare_runs(a, b, ["goodput"])
    assert c.p_value == pytest.approx(1 / 3) and c.verdict == "not enough data"
    # Even a test as lax as alpha 0.3 cannot: the exact test's smallest p is 1/3.
    assert compare_runs(a, b, ["goodput"], alpha=0.3)[0].verdict == "not enough data"
    assert compare_runs(a, b, ["goodput"], alpha=0.34)[0].verdict == "worse"


def test_three_plus_three_needs_alpha_0_1_and_four_plus_four_does_not() -> None:
    a, b = side([100, 101, 102]), side([50, 51, 52], start_id=4)
    assert compare_runs(a, b, ["goodput"])[0].verdict == "not enough data"
    assert compare_runs(a, b, ["goodput"], alpha=0.1)[0].verdict == "worse"
    a4, b4 = side([100, 101, 102, 103]), side([50, 51, 52, 53], start_id=5)
    assert compare_runs(a4, b4, ["goodput"])[0].verdict == "worse"
    assert [min_p_value(n, n) for n in (1, 2, 3, 4)] == pytest.approx([1, 1 / 3, 0.1, 1 / 35])


def test_tied_small_samples_do_not_borrow_the_asymptotic_p() -> None:
    # A tie-corrected normal approximation gives p = 0.047 here (scipy's does), below
    # anything the exact test can reach with 3 + 3: the p is the smallest those sizes
    # allow, 0.1, and there is no verdict.
    (c,) = compare_runs(side([1, 1, 1], "rtt_median"), side([2, 2, 2], "rtt_median", 4),
                        ["rtt_median"])
    assert c.p_value == pytest.approx(0.1) and c.verdict == "not enough data"


def test_tiny_but_significant_change_is_same() -> None:
    a = side([100.0 + i * 0.01 for i in range(8)])
    b = side([100.5 + i * 0.01 for i in range(8)], start_id=9)
    (c,) = compare_runs(a, b, ["goodput"])
    assert c.p_value is not None and c.p_value < 0.01 and c.verdict == "same"
    assert compare_runs(a, b, ["goodput"], min_change_pct=0.1)[0].verdict == "better"


def test_ci_matches_a_brute_force_bootstrap() -> None:
    va, vb = [10.0, 12.0, 11.0, 15.0], [14.0, 13.0, 18.0]
    (c,) = compare_runs(side(va, "rtt_median"), side(vb, "rtt_median", 10), ["rtt_median"],
                        seed=7, resamples=500)
    rng = np.random.default_rng(7)
    ia = rng.integers(0, 4, size=(500, 4))
    ib = rng.integers(0, 3, size=(500, 3))
    changes = []
    for ra, rb in zip(ia, ib, strict=True):
        ma = float(np.median([va[i] for i in ra]))
        mb = float(np.median([vb[i] for i in rb]))
        changes.append(100 * (mb - ma) / ma)
    assert (c.ci_low_pct, c.ci_high_pct) == pytest.approx(
        tuple(np.percentile(changes, [2.5, 97.5])), rel=1e-12)
    # And the resampling itself approximates the exact bootstrap distribution.
    exact = [100 * (float(np.median(rb)) - float(np.median(ra))) / float(np.median(ra))
             for ra in itertools.product(va, repeat=4) for rb in itertools.product(vb, repeat=3)]
    (lo, hi), _ = bootstrap(va, vb, seed=1, resamples=200_000, alpha=0.05)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(exact, [2.5, 97.5])), abs=1.0)


def test_deterministic_per_seed() -> None:
    a, b = side(_normal(100, 5, 6, 5)), side(_normal(95, 5, 6, 6), start_id=7)
    first = compare_runs(a, b, seed=3)
    assert compare_runs(a, b, seed=3) == first
    assert compare_runs(a, b, seed=4)[0].ci_low_pct != first[0].ci_low_pct


def test_default_metrics_are_whole_run_ones_on_both_sides() -> None:
    a = [make_run(run_id=1, goodput=1.0, loss=0.1, flows={"f1": 0.5}),
         make_run(run_id=2, goodput=1.0, rtt_median=3.0)]
    b = [make_run(run_id=3, goodput=2.0, loss=0.2, flows={"f1": 0.7})]
    assert [c.label for c in compare_runs(a, b)] == ["goodput", "loss"]
    assert [c.label for c in compare_runs(a, b, per_flow=True)] == ["goodput", "loss",
                                                                    "goodput@f1"]
    (c,) = compare_runs(a, b, ["goodput@f1"])
    assert (c.flow, c.a_values, c.b_values) == ("f1", (0.5,), (0.7,))
    with pytest.raises(UsageError, match="no run on either side has metric jitter"):
        compare_runs(a, b, ["jitter"])


def test_metric_spec_syntax() -> None:
    assert parse_metric("goodput") == MetricKey("goodput")
    assert parse_metric("goodput@bulk.1") == MetricKey("goodput", flow="bulk.1")
    assert parse_metric("cpu.softirq@node=r1,key=all") == MetricKey("cpu.softirq", None,
                                                                      "r1", "all")
    assert str(parse_metric("cpu.softirq@node=r1,key=all")) == "cpu.softirq@node=r1,key=all"
    for bad in ("", "goodput@", "x@colour=red", "@f1"):
        with pytest.raises(UsageError, match="metric"):
            parse_metric(bad)


def test_different_measurement_versions_are_refused() -> None:
    a = side([1, 2, 3])
    b = side([1, 2, 3], start_id=4, measurement_version=MEASUREMENT_VERSION + 1)
    with pytest.raises(UsageError, match="only like with like"):
        compare_runs(a, b)
    with pytest.raises(UsageError, match="only like with like"):
        compare_groups(a, b)


@pytest.mark.parametrize(("name", "way"), [
    ("goodput", "higher"), ("throughput_p5_down", "higher"), ("sent_rate", "higher"),
    ("jain_index", "higher"), ("host_share", None), ("cpu.idle", "higher"),
    ("rtt_p99", "lower"), ("latency_increase", "lower"), ("jitter", "lower"),
    ("loss_up", "lower"), ("owd_down_median", "lower"), ("ipdv_mean", "lower"),
    ("retransmits", "lower"), ("tcp.retrans_segs", "lower"), ("qdisc.drops", "lower"),
    ("qdisc.overlimits", "lower"), ("qdisc.backlog_bytes_max", "lower"),
    ("cpu.softirq", "lower"), ("lost_packets", "lower"), ("out_of_order", "lower"),
    ("packets", None), ("bytes_received", None), ("iface.tx_bytes", None),
    ("qdisc.sent_packets", None), ("wire.dropped_queue", "lower"), ("wire.dropped_loss", None),
    ("profile.kernel", None), ("no_such_metric", None),
])
def test_direction(name: str, way: str | None) -> None:
    assert better(name) == way


def test_groups_pair_tests_and_variants_but_not_the_contrast() -> None:
    a = [make_run(t, rep=r, variant={"hops": h, "qos": "off"}, run_id=i, goodput=100.0 + r)
         for i, (t, h, r) in enumerate(itertools.product(("bulk", "ping"), (1, 2), (1, 2)))]
    b = [make_run(t, rep=r, variant={"hops": h, "qos": "on"}, run_id=100 + i,
                  goodput=90.0 + r)
         for i, (t, h, r) in enumerate(itertools.product(("bulk",), (1, 2, 3), (1, 2)))]
    result = compare_groups(a, b)
    assert [g.title for g in result.groups] == ["wan / bulk / hops=1", "wan / bulk / hops=2"]
    g = result.groups[0]
    assert (g.a_label, g.b_label, g.a_ids, g.b_ids) == ("qos=off", "qos=on", (0, 1), (100, 101))
    assert g.warnings == ()
    assert result.unmatched == (
        "A's wan / ping / hops=1 (2 runs) has no counterpart in B",
        "A's wan / ping / hops=2 (2 runs) has no counterpart in B",
        "B's wan / bulk / hops=3 (2 runs) has no counterpart in A")


def test_group_labels_and_warnings() -> None:
    a = [make_run(rep=1, run_id=1, labels={"fw": "1.2"}, goodput=1.0),
         make_run(rep=2, run_id=2, labels={"fw": "1.2"}, status="failed", goodput=1.0)]
    b = [make_run("flood", kind="udp", run_id=3, labels={"fw": "1.3"}, version="0.2.0",
                  goodput=2.0)]
    (g,) = compare_groups(a, b).groups
    assert (g.title, g.a_label, g.b_label) == ("wan", "bulk fw=1.2", "flood fw=1.3")
    text = "\n".join(g.warnings)
    assert "A is tcp, B is udp" in text
    assert "A ran 0.1.0, B ran 0.2.0" in text
    assert "run 2 (A) is failed" in text


def test_groups_with_nothing_in_common_are_refused() -> None:
    a = [make_run("bulk", run_id=1, goodput=1.0), make_run("ping", run_id=2, goodput=1.0)]
    b = [make_run("flood", run_id=3, goodput=1.0), make_run("video", run_id=4, goodput=1.0)]
    with pytest.raises(UsageError, match="nothing to compare"):
        compare_groups(a, b)
    with pytest.raises(UsageError, match="metric 'jitter': no selected run has this metric"):
        compare_groups(a[:1], b[:1], ["jitter"])
    with pytest.raises(UsageError, match="nothing to compare: no metric goodput"):
        compare_groups(a, b, ["goodput"])
