"""The tc lines hoplab builds for codel, fq_codel and sfq, handed to the real tc.

This kernel has none of these qdiscs (nor cls_flow), so the kernel refuses them
(exit 2, "Error: ..."), but only after tc has parsed every option: a line tc
cannot parse exits 1 ("What is ...", "Illegal ...") before talking to the
kernel. On a kernel that has them the lines apply (exit 0).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from hoplab.lab.shaping import tc_lines
from hoplab.lab.where import netns_prefix
from hoplab.spec.model import Direction
from tests.helpers.lab import new_lab_name
from tests.unit.test_shaping import LEAF_OPTIONS

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    name = f"{netns_prefix(new_lab_name())}tc"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def tc(ns: str, line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, "tc", *line.split()],
                          capture_output=True, text=True, timeout=10, check=False)


def parsed(ns: str, line: str) -> bool:
    """Did tc parse the line (it applied, or the kernel refused it)?"""
    out = tc(ns, line)
    return out.returncode == 0 or (out.returncode == 2 and ("Error:" in out.stderr
                                                             or "RTNETLINK" in out.stderr))


def directions() -> list[Direction]:
    out = []
    for qdisc, options, queue, _ in LEAF_OPTIONS:
        opts = tuple(sorted(options.items()))
        out += [Direction(qdisc=qdisc, queue=queue, qdisc_options=opts),
                Direction(rate_bps=20_000_000, qdisc=qdisc, queue=queue, qdisc_options=opts)]
    return [*out,
            Direction(qdisc="codel", qdisc_options=(("ce_threshold", 0.001),)),
            Direction(qdisc="fq_codel", qdisc_options=(("ce_threshold", 0.0005), ("ecn", False))),
            Direction(rate_bps=10**7, qdisc="fq_codel", qdisc_options=(("flows", 64),
                                                                        ("keys", "src,dst"))),
            Direction(qdisc="sfq", qdisc_options=(("divisor", 4), ("keys", "proto-dst"),
                                                  ("perturb", 5.0)))]


def test_every_option_line_parses_in_the_real_tc(ns: str) -> None:
    refused, filters = [], 0
    for d in directions():
        for line in tc_lines("lo", d):
            filters += "filter add" in line
            if not parsed(ns, line):
                refused.append(line)
        tc(ns, "qdisc del dev lo root")
    assert refused == []
    assert filters == 2


def test_a_line_tc_cannot_parse_is_told_apart(ns: str) -> None:
    # The check above can fail: these are tc's parse errors, not the kernel's.
    assert not parsed(ns, "qdisc replace dev lo root handle 1: sfq perturb 2.5")
    assert not parsed(ns, "qdisc replace dev lo root handle 1: fq_codel target 5x")
    assert not parsed(ns, "filter add dev lo parent 1: handle 1 protocol all flow hash keys "
                          "src,port divisor 16")
