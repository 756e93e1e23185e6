"""The loader's bounds on rates and queues are tc's real limits: the largest value a lab
file may give applies in the real tc and kernel as hoplab writes it, and the next value
up, which the loader refuses, is one tc or the kernel refuses too (it reached tc at
`lab up` and failed there, exit 1, before the bounds)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from hoplab.errors import SpecError
from hoplab.lab.shaping import FRAME_BYTES, tc_lines
from hoplab.spec import load_lab_text
from hoplab.spec.model import Direction, QueueLimit
from hoplab.spec.qdisc_options import TBF_MAX_RATE_BPS
from hoplab.spec.units import MAX_QUEUE_BYTES, MAX_QUEUE_PACKETS, MAX_RATE_BPS
from tests.helpers.lab import new_lab_name

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    name = f"hoplab-{new_lab_name()}-tc"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def applies(ns: str, d: Direction) -> bool:
    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root"],
                   capture_output=True, check=False)
    lines = tc_lines("lo", d)
    assert lines
    got = subprocess.run(["ip", "netns", "exec", ns, "tc", "-batch", "-"],
                         input="\n".join(lines) + "\n", capture_output=True, text=True,
                         timeout=10, check=False)
    return got.returncode == 0


def loads(options: str) -> bool:
    try:
        load_lab_text(f'name = "x"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n'
                      f"{options}\n", "lab.toml")
    except SpecError:
        return False
    return True


def test_the_largest_rate_applies_and_the_next_does_not(ns: str) -> None:
    assert loads(f"rate = {MAX_RATE_BPS}") and not loads(f"rate = {MAX_RATE_BPS + 1}")
    assert applies(ns, Direction(rate_bps=MAX_RATE_BPS))
    # HTB's bucket is 1 ms of traffic in 32 bits: the real edge is just above the bound.
    assert not applies(ns, Direction(rate_bps=(2**32) * 8000))
    for rate in ('"99999999999999999999tbit"', "1e99"):
        assert not loads(f"rate = {rate}")


def test_tbf_without_a_queue_holds_50ms_in_32_bits(ns: str) -> None:
    assert loads(f'qdisc = "tbf"\nrate = {TBF_MAX_RATE_BPS}')
    assert not loads(f'qdisc = "tbf"\nrate = {TBF_MAX_RATE_BPS + 160}')
    assert applies(ns, Direction(rate_bps=TBF_MAX_RATE_BPS, qdisc="tbf"))
    assert not applies(ns, Direction(rate_bps=TBF_MAX_RATE_BPS + 160, qdisc="tbf"))
    # With a queue it takes every rate the loader accepts.
    assert loads(f'qdisc = "tbf"\nrate = {MAX_RATE_BPS}\nqueue = "64mb"')
    assert applies(ns, Direction(rate_bps=MAX_RATE_BPS, qdisc="tbf",
                                 queue=QueueLimit(bytes=64_000_000)))


def test_the_largest_queues_apply_and_the_next_are_refused(ns: str) -> None:
    assert loads(f"queue = {MAX_QUEUE_PACKETS}") and not loads(f"queue = {MAX_QUEUE_PACKETS + 1}")
    assert loads(f'queue = "{MAX_QUEUE_BYTES}b"')
    assert not loads(f'queue = "{MAX_QUEUE_BYTES + 1}b"')
    assert not loads("queue = 99999999999999")
    rate = 10**9
    for queue in (QueueLimit(packets=MAX_QUEUE_PACKETS), QueueLimit(bytes=MAX_QUEUE_BYTES)):
        assert applies(ns, Direction(rate_bps=rate, queue=queue))
    assert applies(ns, Direction(rate_bps=rate, qdisc="tbf",
                                 queue=QueueLimit(packets=MAX_QUEUE_PACKETS)))
    assert MAX_QUEUE_PACKETS * FRAME_BYTES <= 2**32 - 1
    # One byte more is more than tc's 32-bit limit holds.
    assert not applies(ns, Direction(rate_bps=rate, queue=QueueLimit(bytes=2**32)))
