"""`hoplab show` of a run on a lab with a device: the device's cores are its own rows,
never merged into this machine's, and its sampler's own cost is shown."""

from __future__ import annotations

from rich.console import Console

from hoplab.record import Metric, RunRecord
from hoplab.render.run_view import run_view


def _text(rec: RunRecord) -> str:
    con = Console(width=200, record=True, color_system=None)
    con.print(run_view(rec, "runs.db"))
    return con.export_text()


def test_device_cores_and_sampler_cost_are_shown_apart_from_the_hosts() -> None:
    rec = RunRecord(experiment="e", test="up", kind="tcp", repetition=1, variant={},
                    labels={}, started_at=0.0, metrics=[
                        Metric("cpu.softirq", 12.5, "%", node="host", key="cpu0"),
                        Metric("cpu.softirq", 71.25, "%", node="router", key="cpu0"),
                        Metric("sampler.cpu", 0.62, "%", node="router")])
    lines = _text(rec).splitlines()
    host = next(line for line in lines if line.strip("│ ").startswith("cpu0"))
    router = next(line for line in lines if line.strip("│ ").startswith("router cpu0"))
    assert "12.5" in host and "71.2" not in host
    assert "71.2" in router
    title = lines.index(next(x for x in lines if "sampler cost on each" in x))
    row = next(x for x in lines[title:] if x.strip("│ ").startswith("router"))
    assert "0.62" in row, row
    assert any("sampler CPU" in x for x in lines[title:title + 6])
