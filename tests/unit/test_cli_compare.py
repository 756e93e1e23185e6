"""`hoplab compare` end to end, on stores built from RunRecords."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hoplab.cli.main import main
from hoplab.record import MEASUREMENT_VERSION
from hoplab.store import open_store
from tests.helpers.runs import make_run


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    with open_store(path) as store:
        for rep in range(1, 7):
            for fw, goodput, rtt in (("1.2", 100e6, 10.0), ("1.3", 80e6, 10.0)):
                store.save_run(make_run(rep=rep, labels={"firmware": fw},
                                        goodput=goodput + rep * 1e5, rtt_median=rtt + rep / 10,
                                        packets=1000.0 + rep))
        store.save_run(make_run("ping", kind="ping", labels={"firmware": "1.3"},
                                rtt_median=2.0))
    return path


def test_table_with_verdicts(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "firmware=1.2", "firmware=1.3", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "A firmware=1.2: 6 runs (1, 3, 5, 7, 9, 11)" in out
    assert "wan / bulk  A firmware=1.2: 6 runs" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    assert "worse" in rows["goodput"] and "-19.9 %" in rows["goodput"]
    # The same RTTs on both sides, but 6 runs a side show them the same within 2.5 %,
    # not within the 2 % margin: no clear difference, with what these runs could see.
    assert "-2.4 .. +2.5 %" in rows["RTT median"]
    assert "no clear difference" in rows["RTT median"]
    assert re.search(r"note: no clear difference: the smallest change these runs would "
                     r"have seen 80 % of the time \(p <= 0.05\): RTT median \d+\.\d %",
                     " ".join(out.split()))
    assert "n/a" in rows["packets"]
    assert "not compared: B's wan / ping (1 run) has no counterpart in A" in out


def test_json(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "1,3,5,7", "2,4,6,8", "--db", db, "--json",
                 "--metric", "goodput", "--metric", "packets"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"] == {"spec": "1,3,5,7", "runs": [1, 3, 5, 7]}
    (group,) = data["groups"]
    assert (group["a_label"], group["b_label"]) == ("firmware=1.2", "firmware=1.3")
    goodput, packets = group["metrics"]
    assert goodput["verdict"] == "worse" and goodput["ci_low_pct"] < 0
    assert goodput["p_value"] == pytest.approx(1 / 35)
    assert packets["verdict"] == "n/a"


def test_one_run_each_is_not_enough_data(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "1", "2", "--db", db, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    metrics = data["groups"][0]["metrics"]
    assert {m["verdict"] for m in metrics} == {"not enough data", "n/a"}
    assert all(m["ci_low_pct"] is None and m["p_value"] is None for m in metrics)


@pytest.mark.parametrize(("args", "message"), [
    (["99", "1"], "no run 99 in sqlite"),
    (["firmware=9", "1"], "no runs match 'firmware=9'"),
    (["firmware=1.2", "1-3"], "overlap: both hold run 1, 3;"),
    (["1", "2", "--metric", "jitter"], "metric 'jitter': no selected run has this metric "
                                       "(did you mean "),
    (["1", "2", "--alpha", "2"], "--alpha must be between 0 and 1"),
])
def test_bad_input_exits_2(db: str, capsys: pytest.CaptureFixture[str], args: list[str],
                           message: str) -> None:
    assert main(["compare", *args, "--db", db]) == 2
    assert message in capsys.readouterr().err


def test_different_measurement_versions_exit_2(
        db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(db) as store:
        new = store.save_run(make_run(measurement_version=MEASUREMENT_VERSION + 1, goodput=1.0))
    assert main(["compare", "1", str(new), "--db", db]) == 2
    assert "only like with like" in capsys.readouterr().err


def qos_store(path: Path) -> Path:
    """A qos-under-load experiment as a router-and-QoS session stores one: four tests,
    two repetitions with qos off and on; qos on cuts the RTT under load 10000-fold."""
    with open_store(str(path)) as store:
        for test in ("bulk", "fairness", "flood", "unloaded"):
            for rep in (1, 2):
                for qos, rtt in (("off", 900.0 + rep), ("on", 0.05 + rep / 1000)):
                    run = make_run(test, rep=rep, variant={"qos": qos}, rtt_median=rtt,
                                   goodput=90e6 + rep * 1e5)
                    run.experiment = "qos-under-load"
                    store.save_run(run)
    return path


def test_qos_off_against_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = qos_store(tmp_path / "router-and-qos.db")
    assert main(["compare", "qos=off", "qos=on", "--db", str(store), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    titles = sorted(g["title"] for g in data["groups"])
    assert titles == [f"qos-under-load / {t}" for t in ("bulk", "fairness", "flood", "unloaded")]
    bulk = next(g for g in data["groups"] if g["title"].endswith("bulk"))
    rtt = next(m for m in bulk["metrics"] if m["metric"] == "rtt_median")
    # Two repetitions a side: a 10000-fold drop in RTT, and still no verdict at 0.05.
    assert rtt["b_median"] < rtt["a_median"] / 1000
    assert rtt["verdict"] == "not enough data" and rtt["p_value"] == pytest.approx(1 / 3)
    assert main(["compare", "qos=off", "qos=on", "--db", str(store), "--alpha", "0.34",
                 "--metric", "rtt_median"]) == 0
    out = capsys.readouterr().out
    assert "better" in out and "66 % CI" in out


def test_no_clear_difference_and_the_margin(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 19: 4 runs against 4, one overlap, +3.0 % [+0.7, +5.0], p 0.057: was "same".
    path = str(tmp_path / "runs.db")
    with open_store(path) as store:
        for version, values in (("v1", [99.2, 100.2, 100.6, 101.3]),
                                ("v2", [103.9, 105.4, 102.9, 101.1])):
            for rep, v in enumerate(values, start=1):
                store.save_run(make_run(rep=rep, labels={"version": version}, goodput=v))
    assert main(["compare", "version=v1", "version=v2", "--db", path]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("│ goodput"))
    assert "+3.0 %" in row and "+0.7 .. +5.0 %" in row and "0.057" in row
    assert "no clear difference" in row and "same" not in row
    assert "same within +-2 %" in out
    assert "have seen 80 % of the time (p <= 0.05): goodput 3.9 %" in " ".join(out.split())
    assert main(["compare", "version=v1", "version=v2", "--db", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["margin_pct"] == 2.0
    (m,) = doc["groups"][0]["metrics"]
    assert m["verdict"] == "unclear" and m["detectable_pct"] == pytest.approx(3.94, abs=0.01)
    # Within +-6 %, the interval shows sameness; a margin below 0 is refused.
    assert main(["compare", "version=v1", "version=v2", "--db", path, "--json",
                 "--margin", "6"]) == 0
    (m,) = json.loads(capsys.readouterr().out)["groups"][0]["metrics"]
    assert m["verdict"] == "same" and m["detectable_pct"] is None
    assert main(["compare", "version=v1", "version=v2", "--db", path, "--margin", "-1"]) == 2
    assert "--margin must be 0 or more" in capsys.readouterr().err
