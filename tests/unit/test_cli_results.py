"""`hoplab import`, `plot` and `export` from the command line: files, exit codes, the store."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from hoplab import export
from hoplab.cli.main import main
from hoplab.importers import Options, load_file
from hoplab.store import open_store

DATA = Path(__file__).resolve().parents[1] / "data"
GOOD = [DATA / "iperf3" / "tcp_p4_cport.json", DATA / "iperf3" / "udp_200m.json",
        DATA / "flent" / "ping_loopback.flent.gz"]


def _count(db: Path) -> int:
    with open_store(str(db)) as store:
        return len(store.list_runs())


def test_import_saves_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    args = ["import", *map(str, GOOD), "--db", str(db), "--experiment", "old",
            "--label", "device=rpi4"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "imported 3 run(s)" in out and "tcp_p4_cport" in out
    with open_store(str(db)) as store:
        runs = store.list_runs({"device": "rpi4"})
    assert [(r.experiment, r.kind) for r in runs] == [("old", "tcp"), ("old", "udp"),
                                                      ("old", "ping")]


@pytest.mark.parametrize("damage", ["truncated json", "truncated gzip", "not iperf3",
                                    "missing", "duplicate metric", "NaN in metadata"])
def test_a_bad_file_among_good_ones_imports_nothing(
        damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    assert main(["import", str(GOOD[0]), "--db", str(db)]) == 0
    before = _count(db)
    bad = tmp_path / "bad.json"
    if damage == "truncated json":
        text = GOOD[0].read_text()
        bad.write_text(text[: len(text) // 2])
    elif damage == "truncated gzip":
        bad = tmp_path / "bad.flent.gz"
        data = GOOD[2].read_bytes()
        bad.write_bytes(data[: len(data) - 40])
    elif damage == "not iperf3":
        bad.write_text('{"hello": 1}')
    elif damage in ("duplicate metric", "NaN in metadata"):
        # A hoplab export the store cannot hold: read, parsed, refused only by the store's
        # check (a good file before it was saved, and the import exited 1).
        doc = export.to_json(load_file(GOOD[0], Options()))
        if damage == "duplicate metric":
            doc["metrics"].append(doc["metrics"][0])
        else:
            doc["run"]["metadata"]["x"] = math.nan
        bad.write_text(json.dumps(doc))
    capsys.readouterr()
    code = main(["import", str(GOOD[1]), str(bad), str(GOOD[2]), "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and str(bad) in err
    if damage == "duplicate metric":
        assert "two metrics with the same name" in err
    assert _count(db) == before


def test_bad_label_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(GOOD[0]), "--db", str(tmp_path / "s.db"),
                 "--label", "oops"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_plot_writes_the_default_file_and_prints_its_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "s.db"
    assert main(["import", *map(str, GOOD), "--db", str(db)]) == 0
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["plot", "1", "--kind", "timeseries", "--db", str(db)]) == 0
    assert capsys.readouterr().out.strip() == "hoplab-1-timeseries.png"
    assert (tmp_path / "hoplab-1-timeseries.png").read_bytes().startswith(b"\x89PNG")
    assert main(["plot", "source=iperf3", "--kind", "bars", "--db", str(db),
                 "-o", "b.svg"]) == 0
    assert (tmp_path / "b.svg").exists()
    assert main(["plot", "3", "--kind", "ping", "--style", "points", "--db", str(db),
                 "-o", "p.pdf"]) == 0
    assert (tmp_path / "p.pdf").read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize(("args", "message"), [
    (["1", "2", "--kind", "cpu"], "draws one run"),
    (["1", "--kind", "cpu"], "no CPU series"),
    (["1", "--kind", "cdf", "-o", "x.gif"], ".png"),
    (["hops=9", "--kind", "box"], "no run"),
    (["seven", "--kind", "box"], "a selection is run ids"),
    (["42", "--kind", "box"], "no run 42"),
])
def test_plot_refusals_exit_2(args: list[str], message: str, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "s.db"
    assert main(["import", *map(str, GOOD[:2]), "--db", str(db)]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(["plot", *args, "--db", str(db)]) == 2
    assert message in capsys.readouterr().err


def test_export_json_and_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "s.db"
    assert main(["import", str(GOOD[0]), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["export", "1", "--db", str(db)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "hoplab-run" and doc["run"]["id"] == 1
    assert main(["export", "1", "--format", "csv", "-o", str(tmp_path / "r.csv"),
                 "--db", str(db)]) == 0
    with (tmp_path / "r-series.csv").open() as f:
        rows = list(csv.reader(f))
    with open_store(str(db)) as store:
        run = store.get_run(1)
    assert len(rows) - 1 == sum(len(s.t) for s in run.series)
    assert (tmp_path / "r-metrics.csv").read_text().startswith("run,metric,")
    monkeypatch.chdir(tmp_path)
    assert main(["export", "1", "--format", "csv", "--db", str(db)]) == 0
    assert (tmp_path / "hoplab-1-series.csv").exists()


def test_an_export_imports_into_another_store(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, b, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "run.json"
    assert main(["import", str(GOOD[1]), "--db", str(a)]) == 0
    assert main(["export", "1", "-o", str(out), "--db", str(a)]) == 0
    assert main(["import", str(out), "--db", str(b), "--label", "moved=yes"]) == 0
    with open_store(str(a)) as sa, open_store(str(b)) as sb:
        first, moved = sa.get_run(1, raw=True), sb.get_run(1, raw=True)
    assert moved.labels == first.labels | {"moved": "yes"}
    moved.labels = first.labels
    assert moved == first
