"""One-way delays between two clocks (hoplab.run.one_way), on a real irtt capture: taken
out by the measured offset where it is known to a tenth of the RTT, dropped with the
reason otherwise, and said by `hoplab show`."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from hoplab.kinds.flow import Outcome
from hoplab.kinds.probe import collect_probe
from hoplab.record import RunRecord
from hoplab.render.run_view import run_view
from hoplab.run.one_way import gate
from hoplab.spec.experiment import Flow

DATA = Path(__file__).resolve().parents[1] / "data" / "irtt"
FLOW = Flow(name="voip", kind="probe", src="client", dst="exit", duration_s=10)


def _outcome() -> Outcome:
    out = Outcome(FLOW)
    collect_probe(out, (DATA / "loopback.json").read_text(), t0=0.0)
    return out


def _fig(out: Outcome, name: str) -> float:
    return next(m.value for m in out.metrics if m.name == name and m.flow == "voip")


def _clock(offset_ms: float, unc_ms: float) -> dict[str, Any]:
    return {"offset_s": offset_ms / 1000, "uncertainty_s": unc_ms / 1000,
            "method": "date-ns", "node": "exit"}


def test_ends_on_one_machine_are_left_alone() -> None:
    out = _outcome()
    before = [(s.name, list(s.v)) for s in out.series]
    said = gate([FLOW], {"client": "local", "exit": "local"}, {}, out.metrics, out.series)
    assert said == {} and [(s.name, list(s.v)) for s in out.series] == before


def test_an_offset_known_well_enough_is_taken_out() -> None:
    out = _outcome()
    up, down = _fig(out, "owd_up_median"), _fig(out, "owd_down_median")
    rtt = _fig(out, "rtt_median")
    # The exit's clock runs 37 ms ahead: irtt's delays would read up +37, down -37 ms.
    for s in out.series:
        if s.name in ("owd_up", "owd_down"):
            s.v = [v + (37.0 if s.name == "owd_up" else -37.0) for v in s.v]
    for m in out.metrics:
        if m.name in ("owd_up_median", "owd_down_median"):
            m.value += 37.0 if m.name == "owd_up_median" else -37.0
    unc = rtt * 0.09          # just under a tenth of the RTT
    said = gate([FLOW], {"client": "local", "exit": "root@exit"},
                {"exit": _clock(37.0, unc)}, out.metrics, out.series)
    assert _fig(out, "owd_up_median") == pytest.approx(up, abs=1e-9)
    assert _fig(out, "owd_down_median") == pytest.approx(down, abs=1e-9)
    series_up = next(s for s in out.series if s.name == "owd_up")
    assert statistics.median(series_up.v) == pytest.approx(up, abs=1e-9)
    assert "+37.00 ms" in said["voip"] and "corrected" in said["voip"]


def test_a_device_client_is_taken_out_with_the_other_sign() -> None:
    out = _outcome()
    up = _fig(out, "owd_up_median")
    # The client's clock 10 ms ahead: irtt's up delay reads 10 ms short.
    for s in out.series:
        if s.name == "owd_up":
            s.v = [v - 10.0 for v in s.v]
    for m in out.metrics:
        if m.name == "owd_up_median":
            m.value -= 10.0
    gate([FLOW], {"client": "root@board", "exit": "local"},
         {"client": _clock(10.0, 0.0)}, out.metrics, out.series)
    assert _fig(out, "owd_up_median") == pytest.approx(up, abs=1e-9)


def test_an_offset_not_known_to_a_tenth_of_the_rtt_leaves_rtt_only() -> None:
    out = _outcome()
    rtt = _fig(out, "rtt_median")
    said = gate([FLOW], {"client": "local", "exit": "root@exit"},
                {"exit": _clock(3.0, rtt * 0.1)}, out.metrics, out.series)
    assert not [s for s in out.series if s.name.startswith("owd")]
    assert not [m for m in out.metrics if m.name.startswith("owd")]
    assert _fig(out, "rtt_median") == rtt and _fig(out, "ipdv_mean") > 0
    assert said["voip"].startswith("RTT only: the clocks of client and exit are known to")


def test_an_unread_clock_leaves_rtt_only_with_its_error() -> None:
    out = _outcome()
    said = gate([FLOW], {"client": "local", "exit": "root@exit"},
                {"exit": {"error": "exit: connection lost", "node": "exit"}},
                out.metrics, out.series)
    assert said == {"voip": "RTT only: the clock of exit could not be read: "
                            "exit: connection lost"}
    assert not [m for m in out.metrics if m.name.startswith("owd")]


def test_show_says_what_was_not_measured_and_why() -> None:
    rec = RunRecord(experiment="e", test="voice", kind="probe", repetition=1, variant={},
                    labels={}, started_at=0.0, metadata={
                        "one_way": {"voip": "RTT only: the clock of exit was not measured"},
                        "samplers_missing": "router: tcp: no /proc/net/snmp",
                        "rebooted": {"router": "rebooted since the previous run"}})
    con = Console(width=200, record=True, color_system=None)
    con.print(run_view(rec, "runs.db"))
    text = con.export_text()
    assert "one-way, voip" in text and "clock of exit was not measured" in text
    assert "not sampled" in text and "no /proc/net/snmp" in text
    assert "rebooted, router" in text
