"""Undo commands in a lab's process log: what a test put on a node (the throughput
kind's nft counter table on a device) is taken away by `lab down` / `hoplab clean` when
a killed run could not."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hoplab.nodes.tracking import LOG_NAME, ProcessRecord, recorded_undo


def _log(tmp_path: Path) -> ProcessRecord:
    rec = ProcessRecord("nolab")
    rec.active, rec.path = True, tmp_path / LOG_NAME
    return rec


def test_an_undo_not_done_is_listed_newest_first(tmp_path: Path) -> None:
    rec = _log(tmp_path)
    rec.will_undo("router", ["nft", "delete", "table", "netdev", "hoplab_rx_0"])
    rec.will_undo("router", ["nft", "delete", "table", "netdev", "hoplab_rx_1"])
    rec.undone("router", ["nft", "delete", "table", "netdev", "hoplab_rx_0"])
    state = SimpleNamespace(rundir=tmp_path, processes=[])
    assert recorded_undo(state) == [("router", ["nft", "delete", "table", "netdev",
                                                "hoplab_rx_1"])]


def test_a_line_cut_short_by_a_kill_is_skipped(tmp_path: Path) -> None:
    rec = _log(tmp_path)
    rec.will_undo("r", ["true"])
    with (tmp_path / LOG_NAME).open("a") as f:
        f.write('{"op": "undo", "node": "r", "ar')
    assert recorded_undo(SimpleNamespace(rundir=tmp_path, processes=[])) == [("r", ["true"])]
