"""Text from a run, a file or a device is printed as it is: never read as rich markup.

An error is a device's stderr and a name is whatever a file says; `[/bold]` in one
crashed `hoplab import` after it had saved (rich's MarkupError) and `hoplab show`, and
`[red]` in a test name vanished from `hoplab runs`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab.cli.main import main
from hoplab.record import Metric, RunRecord
from hoplab.render.console import console
from hoplab.render.summary import summary_table

IPERF3 = Path(__file__).resolve().parents[1] / "data" / "iperf3"
HOSTILE = "control socket [/bold] closed [red]x\\"


def _flat(text: str) -> str:
    """The words of `text`, whatever the width of the terminal folded."""
    return " ".join(text.split())


def _failed_output(tmp_path: Path) -> Path:
    doc = json.loads((IPERF3 / "error_server_killed.json").read_text())
    doc["error"] = HOSTILE
    out = tmp_path / "killed[red].json"
    out.write_text(json.dumps(doc))
    return out


def test_import_show_and_runs_print_hostile_text_as_it_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    assert main(["import", str(_failed_output(tmp_path)), "--db", db,
                 "--label", "fw=[/bold]v2"]) == 0
    out = _flat(capsys.readouterr().out)
    assert f"iperf3: {HOSTILE}" in out
    assert "killed[red].json -> imported/killed[red]" in out
    assert main(["show", "1", "--db", db]) == 0
    out = _flat(capsys.readouterr().out)
    assert f"failed: iperf3: {HOSTILE}" in out
    assert "killed[red] (tcp)" in out and "fw=[/bold]v2" in out
    assert main(["runs", "--db", db]) == 0
    assert "killed[red]" in capsys.readouterr().out


def test_compare_prints_selections_and_names_as_they_are(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    for label in ("fw=[red]1", "fw=[/red]2"):
        assert main(["import", str(IPERF3 / "tcp_upload.json"), "--db", db,
                     "--test", "up[/bold]", "--label", label]) == 0
    capsys.readouterr()
    assert main(["compare", "fw=[red]1", "fw=[/red]2", "--db", db]) == 0
    out = _flat(capsys.readouterr().out)
    assert "A fw=[red]1: 1 run (1)" in out and "B fw=[/red]2: 1 run (2)" in out
    assert "imported / up[/bold]" in out


def test_the_experiment_summary_prints_names_as_they_are() -> None:
    runs = [RunRecord(experiment="e", test="t[/bold]", kind="ping", repetition=1,
                      variant={"fw": "[red]"}, labels={}, started_at=0.0,
                      metrics=[Metric("rtt_median", 1.0 + rep, "ms")])
            for rep in range(2)]
    out = console()
    with out.capture() as captured:
        out.print(summary_table(runs, title="exp[/]"))
    text = _flat(captured.get())
    assert "exp[/]: t[/bold] (ping)" in text and "fw=[red]" in text


def test_doctor_prints_what_the_tools_said_as_it_is() -> None:
    from hoplab.cli import doctor
    from hoplab.lab.caps import Capabilities

    caps = Capabilities(kernel="6.1[/bold]", tools={"iperf3": "iperf 3.12 [/red]"})
    out = console()
    with out.capture() as captured:
        doctor._print(doctor.report(caps), out)
    text = _flat(captured.get())
    assert "kernel 6.1[/bold]" in text and "iperf 3.12 [/red]" in text
