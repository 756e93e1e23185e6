"""JSON export round-trips to the stored run; CSV has one row per series point."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from hoplab import export
from hoplab.errors import UsageError
from hoplab.importers import Options, load_file
from hoplab.record import Metric, RunRecord
from hoplab.store import open_store

DATA = Path(__file__).resolve().parents[1] / "data"


def _stored(tmp_path: Path, name: str = "iperf3/tcp_bidir.json") -> RunRecord:
    run = load_file(DATA / name, Options())
    run.variant = {"hops": 2, "wireguard": True}
    run.seed, run.order, run.experiment_id = 42, 3, "abc"
    with open_store(str(tmp_path / "s.db")) as store:
        return store.get_run(store.save_run(run), raw=True)


@pytest.mark.parametrize("name", ["iperf3/tcp_bidir.json", "iperf3/error_refused.json",
                                  "flent/tcp_2up_iperf_loopback.flent.gz"])
def test_json_round_trips_to_get_run(name: str, tmp_path: Path) -> None:
    run = _stored(tmp_path, name)
    text = json.dumps(export.to_json(run), allow_nan=False)
    again = export.from_json(json.loads(text))
    assert again == run
    assert again.raw[0].data == run.raw[0].data


def test_nan_metrics_are_null_in_json_and_nan_again() -> None:
    run = RunRecord("e", "t", "tcp", 1, {}, {}, 0.0, metrics=[Metric("x", float("nan"), "ms")])
    doc = export.to_json(run)
    assert doc["metrics"][0]["value"] is None
    back = export.from_json(json.loads(json.dumps(doc, allow_nan=False)))
    assert back.metrics[0].value != back.metrics[0].value


def test_other_formats_are_refused() -> None:
    with pytest.raises(UsageError, match="not a hoplab run export"):
        export.from_json({"format": "x"})
    with pytest.raises(UsageError, match="version 99"):
        export.from_json({"format": export.FORMAT, "format_version": 99})


def test_series_csv_has_one_row_per_point(tmp_path: Path) -> None:
    run = _stored(tmp_path)
    buf = io.StringIO()
    rows = export.write_series_csv(run, buf)
    table = list(csv.reader(io.StringIO(buf.getvalue())))
    assert tuple(table[0]) == export.SERIES_HEADER
    assert rows == len(table) - 1 == sum(len(s.t) for s in run.series)
    first = run.series[0]
    assert table[1] == [str(run.id), first.name, "", first.flow, first.key, first.unit,
                        repr(first.t[0]), repr(first.v[0])]
    assert [float(r[7]) for r in table[1:len(first.v) + 1]] == first.v


def test_metrics_csv_has_every_metric(tmp_path: Path) -> None:
    run = _stored(tmp_path)
    buf = io.StringIO()
    export.write_metrics_csv(run, buf)
    table = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert len(table) == len(run.metrics)
    goodput = next(r for r in table if r["metric"] == "goodput" and not r["flow"])
    assert float(goodput["value"]) == run.metric("goodput")
    assert goodput["unit"] == "bit/s"
