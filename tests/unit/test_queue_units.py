"""A queue's "packets" are what the emulator counts: the kernel's qdiscs count a GSO
super-frame of up to 64 KiB as one, hoplab-wire counts wire-size frames. Where queues
are shown, the backlog's bytes stand beside its packets and the table says which
packets these are (docs/lab-format.md)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from hoplab import metrics
from hoplab.cli import doctor
from hoplab.record import Metric, RunRecord
from hoplab.render.run_view import run_view
from hoplab.tools.tc import parse_tc_json

TC = Path(__file__).resolve().parents[1] / "data" / "tc"


def _text(renderable: object) -> str:
    con = Console(width=240, record=True, color_system=None)
    con.print(renderable)
    return con.export_text()


def test_show_puts_a_qdiscs_bytes_beside_its_super_frames() -> None:
    # A real capture under TCP load: r2's tbf held 2 packets of 54,504 bytes, 27 kB
    # each, GSO super-frames of some 18 wire-size frames.
    (tbf,) = [q for q in parse_tc_json((TC / "r2-htb-tbf-tcp-load.json").read_text())
              if q.kind == "tbf"]
    assert (tbf.backlog_packets, tbf.backlog_bytes) == (2, 54504)
    rec = RunRecord(experiment="e", test="up", kind="tcp", repetition=1, variant={},
                    labels={}, started_at=0.0, metrics=[
                        Metric("qdisc.backlog_packets_max", float(tbf.backlog_packets),
                               "packets", node="r2", key=tbf.key),
                        Metric("qdisc.backlog_bytes_max", float(tbf.backlog_bytes), "bytes",
                               node="r2", key=tbf.key)])
    lines = _text(run_view(rec, "runs.db")).splitlines()
    title = next(i for i, line in enumerate(lines) if "qdiscs in the load phase" in line)
    assert "GSO" in " ".join(lines[title:title + 2])
    row = next(line for line in lines[title:] if "r2 eth1 1: tbf" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[-2:] == ["2", "54.5 kB"], row
    assert metrics.label("qdisc.backlog_packets_max") == "max backlog (qdisc pkts)"
    assert metrics.label("wire.queue_packets_max") == "wire max queue (frames)"


def test_the_tables_of_queues_say_which_packets_they_count() -> None:
    con = Console(width=120, record=True, color_system=None)
    doctor._print_links([{"label": "links[1] (r1 <-> r2)", "emulator": "tc",
                          "forward_queue": "fifo 1000 packets",
                          "reverse_queue": "fifo 1000 packets", "problems": []}], con)
    text = " ".join(con.export_text().split())
    assert "fifo 1000 packets" in text
    assert "GSO super-frame of up to 64 KiB as one packet" in text
    assert "hoplab-wire (wire) counts wire-size frames" in text
