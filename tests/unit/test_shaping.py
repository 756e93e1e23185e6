"""tc_lines: the exact `tc -batch` lines for one direction of a link."""

from __future__ import annotations

import pytest

from hoplab.lab.shaping import MIN_BURST, burst_bytes, tc_lines
from hoplab.spec.model import Direction, QueueLimit

ROOT = "qdisc replace dev eth0 root handle 1:"


def htb(rate: str, burst: int, leaf: str, dev: str = "eth0") -> list[str]:
    return [
        f"qdisc replace dev {dev} root handle 1: htb default 1 r2q 1000",
        f"class add dev {dev} parent 1: classid 1:1 htb rate {rate} ceil {rate} "
        f"burst {burst} cburst {burst}",
        f"qdisc add dev {dev} parent 1:1 handle 10: {leaf}",
    ]


def test_plain_direction_needs_no_tc() -> None:
    assert tc_lines("eth0", Direction()) == []


def test_burst_is_one_ms_but_at_least_one_gso_frame() -> None:
    assert MIN_BURST == 65536 + 1514
    assert burst_bytes(100_000_000) == MIN_BURST  # 1 ms = 12 500 B, below one GSO frame
    assert burst_bytes(1_000_000_000) == 125_000
    assert burst_bytes(10_000_000_000) == 1_250_000
    assert burst_bytes(64_000) == MIN_BURST


def test_rate_only_is_htb_with_a_class_and_pfifo() -> None:
    assert tc_lines("eth0", Direction(rate_bps=100_000_000)) == htb(
        "100000000bit", 67050, "pfifo limit 1000")


def test_rate_uses_the_device_name_everywhere() -> None:
    assert tc_lines("eth3", Direction(rate_bps=1_000_000_000)) == htb(
        "1000000000bit", 125000, "pfifo limit 1000", dev="eth3")


def test_rate_with_packet_queue_is_pfifo_of_that_size() -> None:
    d = Direction(rate_bps=20_000_000, queue=QueueLimit(packets=100))
    assert tc_lines("eth0", d) == htb("20000000bit", 67050, "pfifo limit 100")


def test_rate_with_byte_queue_is_bfifo() -> None:
    d = Direction(rate_bps=50_000_000, queue=QueueLimit(bytes=64_000))
    assert tc_lines("eth0", d) == htb("50000000bit", 67050, "bfifo limit 64000")


def test_explicit_htb_is_the_same_as_the_default() -> None:
    d = Direction(rate_bps=50_000_000)
    assert tc_lines("eth0", Direction(rate_bps=50_000_000, qdisc="htb")) == tc_lines("eth0", d)


def test_tbf_default_limit_is_50ms_of_traffic() -> None:
    d = Direction(rate_bps=1_000_000_000, qdisc="tbf")
    assert tc_lines("eth0", d) == [f"{ROOT} tbf rate 1000000000bit burst 125000 limit 6250000"]


def test_tbf_limit_is_never_below_the_burst() -> None:
    # 50 ms of 10 Mbit/s is 62 500 B, less than the 67 050 B bucket.
    d = Direction(rate_bps=10_000_000, qdisc="tbf")
    assert tc_lines("eth0", d) == [f"{ROOT} tbf rate 10000000bit burst 67050 limit 67050"]
    small = Direction(rate_bps=10_000_000, qdisc="tbf", queue=QueueLimit(packets=10))
    assert tc_lines("eth0", small) == [f"{ROOT} tbf rate 10000000bit burst 67050 limit 67050"]


@pytest.mark.parametrize(("queue", "limit"), [
    (QueueLimit(bytes=200_000), 200_000),
    (QueueLimit(packets=100), 151_400),
])
def test_tbf_queue_sets_the_byte_limit(queue: QueueLimit, limit: int) -> None:
    d = Direction(rate_bps=10_000_000, qdisc="tbf", queue=queue)
    assert tc_lines("eth0", d) == [f"{ROOT} tbf rate 10000000bit burst 67050 limit {limit}"]


def test_fifo_without_rate_is_a_root_fifo() -> None:
    assert tc_lines("eth0", Direction(qdisc="fifo")) == [f"{ROOT} pfifo limit 1000"]
    assert tc_lines("eth0", Direction(qdisc="fifo", queue=QueueLimit(packets=50))) == [
        f"{ROOT} pfifo limit 50"]
    assert tc_lines("eth0", Direction(qdisc="fifo", queue=QueueLimit(bytes=30_000))) == [
        f"{ROOT} bfifo limit 30000"]


def test_queue_alone_is_a_root_fifo() -> None:
    assert tc_lines("eth0", Direction(queue=QueueLimit(packets=64))) == [
        f"{ROOT} pfifo limit 64"]


def test_rate_with_fq_codel_leaf() -> None:
    d = Direction(rate_bps=100_000_000, qdisc="fq_codel",
                  queue=QueueLimit(packets=500))
    assert tc_lines("eth0", d) == htb("100000000bit", 67050, "fq_codel limit 500")
    d = Direction(rate_bps=100_000_000, qdisc="fq_codel", queue=QueueLimit(bytes=1_000_000))
    assert tc_lines("eth0", d) == htb("100000000bit", 67050, "fq_codel memory_limit 1000000")


def test_delay_and_loss_use_netem() -> None:
    d = Direction(delay_s=0.020, jitter_s=0.001, loss_pct=0.5)
    assert tc_lines("eth0", d) == [f"{ROOT} netem delay 20000us 1000us loss 0.5% limit 10000"]
    shaped = Direction(rate_bps=100_000_000, delay_s=0.005, queue=QueueLimit(packets=200))
    assert tc_lines("eth0", shaped) == htb("100000000bit", 67050,
                                           "netem delay 5000us limit 200")


# Every option a lab may write for the kernel's codel, fq_codel and sfq, against
# the syntax of tc-codel(8), tc-fq_codel(8), tc-sfq(8) and tc-flow(8) (iproute2
# 6.1). tests/lab/test_tc_syntax.py hands the same lines to the real tc.
LEAF_OPTIONS: list[tuple[str, dict[str, float | int | bool], QueueLimit | None, str]] = [
    ("codel", {}, None, "codel"),
    ("codel", {"limit": 300}, None, "codel limit 300"),
    ("codel", {}, QueueLimit(packets=200), "codel limit 200"),
    ("codel", {"limit": 50}, QueueLimit(packets=200), "codel limit 50"),
    ("codel", {"target": 0.003, "interval": 0.04}, None, "codel interval 40000us target 3000us"),
    ("codel", {"target": 0.0005}, None, "codel target 500us"),
    ("codel", {"ecn": True}, None, "codel ecn"),
    ("codel", {"ecn": False}, None, "codel noecn"),
    ("fq_codel", {}, None, "fq_codel"),
    ("fq_codel", {"limit": 2000, "flows": 256, "quantum": 300}, None,
     "fq_codel flows 256 limit 2000 quantum 300"),
    ("fq_codel", {"memory_limit": 4_000_000}, None, "fq_codel memory_limit 4000000"),
    ("fq_codel", {}, QueueLimit(bytes=1_000_000), "fq_codel memory_limit 1000000"),
    ("fq_codel", {"target": 0.005, "interval": 0.1}, None,
     "fq_codel interval 100000us target 5000us"),
    ("fq_codel", {"ecn": False}, None, "fq_codel noecn"),
    ("fq_codel", {"ecn": True}, None, "fq_codel ecn"),
    ("sfq", {}, None, "sfq"),
    ("sfq", {"limit": 3000, "flows": 512, "divisor": 16384, "depth": 64, "quantum": 1514}, None,
     "sfq depth 64 divisor 16384 flows 512 limit 3000 quantum 1514"),
    ("sfq", {"perturb": 5.0}, None, "sfq perturb 5"),
    ("sfq", {"perturb": 0.0}, None, "sfq perturb 0"),
    ("sfq", {}, QueueLimit(packets=100), "sfq limit 100"),
]


@pytest.mark.parametrize(("qdisc", "options", "queue", "leaf"), LEAF_OPTIONS)
def test_aqm_options_become_tc_syntax(qdisc: str, options: dict[str, float | int | bool],
                                      queue: QueueLimit | None, leaf: str) -> None:
    d = Direction(rate_bps=20_000_000, qdisc=qdisc, queue=queue,
                  qdisc_options=tuple(sorted(options.items())))
    assert tc_lines("eth0", d) == htb("20000000bit", 67050, leaf)
    root = Direction(qdisc=qdisc, queue=queue, qdisc_options=tuple(sorted(options.items())))
    assert tc_lines("eth0", root) == [f"{ROOT} {leaf}"]


def test_flow_keys_are_a_flow_filter_with_the_qdiscs_buckets() -> None:
    fq = Direction(rate_bps=20_000_000, qdisc="fq_codel",
                   qdisc_options=(("flows", 64), ("keys", "src")))
    assert tc_lines("eth0", fq) == [
        *htb("20000000bit", 67050, "fq_codel flows 64"),
        "filter add dev eth0 parent 10: handle 1 protocol all flow hash keys src divisor 64"]
    sfq = Direction(qdisc="sfq", qdisc_options=(("divisor", 16),
                                                ("keys", "src,dst,proto,proto-src,proto-dst")))
    assert tc_lines("eth0", sfq) == [
        f"{ROOT} sfq divisor 16",
        "filter add dev eth0 parent 1: handle 1 protocol all flow hash keys "
        "src,dst,proto,proto-src,proto-dst divisor 16"]


def test_sfq_behind_a_flow_filter_is_perturbed_by_the_filter() -> None:
    # tc-sfq(8): perturb "has no effect when external flow classification is
    # used"; tc-flow(8)'s hash takes its own perturb. Without this the kernel's
    # sfq with keys would never rehash.
    d = Direction(rate_bps=10_000_000, qdisc="sfq",
                  qdisc_options=(("divisor", 4), ("keys", "src"), ("perturb", 5.0)))
    assert tc_lines("eth0", d) == [
        *htb("10000000bit", 67050, "sfq divisor 4"),
        "filter add dev eth0 parent 10: handle 1 protocol all flow hash keys src divisor 4 "
        "perturb 5"]
