"""The `tc -s qdisc show` text parser agrees with the JSON one on captures of the same
state, and reads backlog and drops from a capture taken under load."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.tools.tc import QdiscStats, parse_tc_json, parse_tc_text

DATA = Path(__file__).resolve().parents[1] / "data" / "tc"


@pytest.mark.parametrize("name", ["text-htb-tbf-ingress", "text-pfifo"])
def test_text_matches_json(name: str) -> None:
    text = parse_tc_text((DATA / f"{name}.txt").read_text())
    ref = parse_tc_json((DATA / f"{name}.json").read_text())
    assert text == ref
    assert text  # lo's noqueue skipped, the others kept


def test_htb_tbf_fields() -> None:
    qs = {q.key: q for q in parse_tc_text((DATA / "text-htb-tbf-ingress.txt").read_text())}
    assert set(qs) == {"hbc1 1: htb", "hbc1 10: tbf", "hbc1 ffff: ingress"}
    assert qs["hbc1 10: tbf"].parent == "1:10"
    assert qs["hbc1 1: htb"].parent is None
    assert qs["hbc1 10: tbf"].sent_bytes == 3173050
    assert qs["hbc1 10: tbf"].overlimits == 2138


def test_backlog_and_drops_for_one_device() -> None:
    (q,) = parse_tc_text((DATA / "text-tbf-backlog-dev.txt").read_text(), dev="hbc1")
    assert q == QdiscStats(dev="hbc1", handle="1:", kind="tbf", parent=None,
                           sent_bytes=150167, sent_packets=114, drops=1920, overlimits=2243,
                           requeues=0, backlog_bytes=29800, backlog_packets=20)


def test_size_suffix() -> None:
    text = ("qdisc pfifo 1: dev eth0 root refcnt 2 limit 100p\n"
            " Sent 10 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) \n"
            " backlog 3Kb 2p requeues 0\n")
    (q,) = parse_tc_text(text)
    assert (q.backlog_bytes, q.backlog_packets) == (3072, 2)


def test_line_without_device_needs_one() -> None:
    with pytest.raises(ValueError, match="no device"):
        parse_tc_text((DATA / "text-tbf-backlog-dev.txt").read_text())
