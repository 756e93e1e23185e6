"""The sender's rate (what iperf3's sender wrote into its socket) is kept, as seed 003
sums it, but named for what it is, explained wherever it is shown, and never a TCP
test's headline: on the real 3 s upload of tests/data/render_runs it reads 100.4
Mbit/s through the 100 Mbit/s link, where 95.7 Mbit/s arrived."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab import kinds, metrics
from hoplab.analysis.groups import compare_groups
from hoplab.cli.main import main
from hoplab.render import comparison
from hoplab.render.html import headline_table, run_tables
from hoplab.render.report import summary_of
from hoplab.render.summary import summary_rows
from tests.helpers.runs import real_run, real_store

NOTE = "what the senders wrote into their sockets"


def test_it_is_named_and_explained_in_the_registry() -> None:
    assert metrics.label("sent_rate") == "sent into socket"
    assert NOTE in metrics.note("sent_rate") and "goodput is what arrived" in \
        metrics.note("sent_rate")
    run = real_run("tcp")
    assert run.metric("sent_rate") == pytest.approx(100.4e6, rel=1e-3)
    assert run.metric("goodput") == pytest.approx(95.7e6, rel=1e-3)


def test_no_kind_has_it_as_a_headline() -> None:
    for name in kinds.names():
        kind = kinds.get(name)
        assert "sent_rate" not in (*kind.headline, *kind.flow_headline), name


def test_show_says_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (rid,) = real_store(tmp_path / "s.db", "tcp")
    assert main(["show", str(rid), "--db", str(tmp_path / "s.db")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "sent into socket │ 100 Mbit/s" in out
    assert f"note: sent into socket: {NOTE}" in out


def test_headline_views_lead_with_what_arrived(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (rid,) = real_store(tmp_path / "s.db", "tcp")
    assert main(["runs", "--db", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "goodput 95.7 Mbit/s" in out and "sent into socket" not in out
    run = real_run("tcp")
    run.id = rid
    (row,) = summary_rows([run])
    assert list(row["figures"]) == ["goodput", "throughput_p5", "retransmits"]
    assert "sent into socket" not in headline_table([summary_of(run)])


def test_the_report_and_compare_explain_it() -> None:
    run = real_run("tcp")
    run.id = 1
    assert f"note: sent into socket: {NOTE}" in run_tables(run)
    a, b = real_run("tcp"), real_run("tcp")
    a.id, b.id = 1, 2
    a.variant, b.variant = {"gro": "off"}, {"gro": "on"}
    (group,) = compare_groups([a], [b]).groups
    assert any(n.startswith(f"sent into socket: {NOTE}") for n in comparison.notes(group, 0.05))
