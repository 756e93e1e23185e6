"""`hoplab show` of a run whose figures carry a key (a throughput search's frame size):
they are shown, one row per key (before, its figures table left them out)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from rich.console import Console

from hoplab.export import from_json
from hoplab.render.run_view import run_view

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_throughput_run_shows_its_ndr_by_frame_size() -> None:
    doc = json.loads(gzip.decompress((DATA / "throughput_runs" / "ndr-50mbit.json.gz")
                                     .read_bytes()))
    rec = from_json(doc)
    console = Console(width=200, record=True, color_system=None)
    console.print(run_view(rec, "x.db"))
    text = console.export_text()
    assert "figures by frames" in text
    ndr = {m.key: m.value for m in rec.metrics if m.name == "ndr_fps" and m.flow is None}
    for size in ("64", "512", "1518"):
        row = next(line for line in text.splitlines()
                   if line.strip("│ ").split(" ")[0] == size)
        assert f"{round(ndr[size])}/s" in row, (size, row)
    assert any(line.strip("│ ").startswith("1518 p99") for line in text.splitlines())
