"""`hoplab annotate` (issue 21): annotations on a label value or at a time, listed and
removed; drawn on the trend charts of the report and the dashboard where they fall, and
listed beside the dashboard's changes."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from hoplab.cli.main import main
from hoplab.render.report import build_report
from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.versions import history_store


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "runs.db"
    history_store(path)             # v1 ... v60, the -49 % step at v45 -> v46
    return str(path)


def _list(db: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    assert main(["annotate", "--list", "--json", "--db", db]) == 0
    out: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return out


def test_annotate_list_and_remove(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["annotate", "version=v46", "kernel 6.1 -> 6.6", "--db", db]) == 0
    assert capsys.readouterr().out == "annotation 1: version=v46: kernel 6.1 -> 6.6\n"
    assert main(["annotate", "--at", "2023-11-15 10:00", "cable swapped", "--db", db]) == 0
    assert capsys.readouterr().out == "annotation 2: at 2023-11-15 10:00: cable swapped\n"
    assert main(["annotate", "version=v99", "not run yet", "--db", db]) == 0
    assert "note: no stored run has version=v99 yet" in capsys.readouterr().err
    notes = _list(db, capsys)
    local = dt.datetime(2023, 11, 15, 10, 0).timestamp()
    assert [(n["id"], n["key"], n["value"], n["at"], n["text"]) for n in notes] == [
        (1, "version", "v46", None, "kernel 6.1 -> 6.6"), (2, None, None, local, "cable swapped"),
        (3, "version", "v99", None, "not run yet")]
    assert main(["annotate", "--list", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "1  version=v46  kernel 6.1 -> 6.6", "2  2023-11-15 10:00:00  cable swapped"]
    assert main(["annotate", "--remove", "3", "--db", db]) == 0
    assert capsys.readouterr().out == "removed annotation 3 (version=v99: not run yet)\n"
    assert [n["id"] for n in _list(db, capsys)] == [1, 2]
    # Unix seconds and an offset are times too.
    assert main(["annotate", "--at", "1700000000", "x", "--db", db]) == 0
    assert main(["annotate", "--at", "2023-11-14T22:13:20+00:00", "y", "--db", db]) == 0
    capsys.readouterr()
    assert [n["at"] for n in _list(db, capsys)][2:] == [1.7e9, 1.7e9]


@pytest.mark.parametrize(("args", "message"), [
    (["version=v1"], "give a label value and a text"),
    (["kernel bump"], "give a label value and a text"),
    (["version", "text"], "annotate 'version'"),
    (["--at", "yesterday", "text"], "--at 'yesterday': not a time"),
    (["--at", "2023-11-15", "version=v1", "text"], "with --at, give the text only"),
    (["--remove", "7"], "no annotation 7 in sqlite"),
    (["--remove", "x"], "--remove 'x': expected a whole number"),
    (["--list", "--remove", "1"], "give one of"),
    ([], "give one of"),
    (["version=v1", "  ", ], "an annotation needs a text"),
    (["version=v1", "t", "--json"], "--json goes with --list"),
])
def test_bad_input_exits_2_and_stores_nothing(db: str, capsys: pytest.CaptureFixture[str],
                                              args: list[str], message: str) -> None:
    assert main(["annotate", *args, "--db", db]) == 2
    assert message in capsys.readouterr().err
    assert _list(db, capsys) == []


def _shapes(figure: dict[str, object]) -> list[tuple[float, str]]:
    layout = figure["layout"]
    assert isinstance(layout, dict)
    return [(s["x0"], s["line"]["dash"]) for s in layout.get("shapes", [])]


def test_drawn_on_trend_charts_and_beside_the_changes(
        db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(db) as store:
        v31 = min(r.started_at for r in store.list_runs({"version": "v31"}))
        store.add_annotation("kernel 6.1 -> 6.6", key="version", value="v46")
        store.add_annotation("cable swapped", at=v31 - 60)     # just before v31 ran
        store.add_annotation("on no chart", key="firmware", value="x")
        runs = [store.get_run(r.id) for r in store.list_runs()]
        notes = store.annotations()
        dash = Dashboard(store)
        trend = dash.handle("/trend?metric=goodput&by=version&experiment=nat").body.decode()
        home = dash.handle("/").body.decode()

    # The report's chart of goodput by version: the change points dashed, the notes dotted
    # at v46 (the 46th value: 45) and between v30 and v31 (29.5).
    report = build_report(runs, "test", notes=notes)
    fig = json.loads(re.search(r'hoplabDraw\("trend-0", (\{.*?\})\);</script>',
                               report).group(1))  # type: ignore[union-attr]
    assert sorted(_shapes(fig)) == [(14.5, "dash"), (29.5, "dash"), (29.5, "dot"),
                                    (44.5, "dash"), (45.0, "dot")]
    assert "<li>version=v46: kernel 6.1 -&gt; 6.6 " in report
    assert "on no chart" not in report

    # The dashboard's trend page, the same places.
    fig = json.loads(re.search(r'hoplabDraw\("trend", (\{.*?\})\);</script>',
                               trend).group(1))  # type: ignore[union-attr]
    assert sorted(x for x, dash_ in _shapes(fig) if dash_ == "dot") == [29.5, 45.0]

    # Beside the v45 -> v46 step on the home: the note on v46, not the others.
    (row,) = re.findall(r'<tr class="change".*?</tr>', home, re.S)
    assert re.findall(r'<div class="annotation">([^<]*)</div>', row) == [
        "✎ version=v46: kernel 6.1 -&gt; 6.6"]
