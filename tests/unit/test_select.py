"""Choosing runs: ids, ranges, key=value selections and their errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.analysis.select import select, select_many, select_one, select_pair
from hoplab.errors import UsageError
from hoplab.store import Store, open_store
from tests.helpers.runs import make_run


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "runs.db")) as s:
        for test in ("bulk", "ping"):
            for qos in ("off", "on"):
                for rep in (1, 2):
                    s.save_run(make_run(test, rep=rep, variant={"qos": qos, "hops": 2},
                                        labels={"version": "v1"}, goodput=1.0))
        # Runs 9 and 10: a failed run and a wireguard variant.
        s.save_run(make_run("bulk", variant={"qos": "on", "hops": 2}, status="failed",
                            labels={"note": "cable"}))
        s.save_run(make_run("bulk", variant={"qos": "on", "hops": 2, "wg": True},
                            labels={"version": "v2"}, goodput=1.0))
        yield s


def test_ids_lists_and_ranges(store: Store) -> None:
    assert select(store, "3") == [3]
    assert select(store, "3,1") == [3, 1]
    assert select(store, "2-4") == [2, 3, 4]
    assert select(store, " 1 , 5-6,6 ") == [1, 5, 6]
    assert select(store, "9") == [9], "an explicit id is taken whatever its status"


def test_key_value_selections(store: Store) -> None:
    assert select(store, "qos=off") == [1, 2, 5, 6]
    assert select(store, "test=bulk,qos=on") == [3, 4, 10]
    assert select(store, "experiment=wan,test=ping,qos=on") == [7, 8]
    assert select(store, "version=v2") == [10]
    assert select(store, "wg=true") == [10]
    assert select(store, "hops=2,status=failed") == [9]
    with pytest.raises(UsageError, match="only failed or interrupted runs do"):
        select(store, "note=cable")         # failed runs only when asked for


def test_unknown_run_id(store: Store) -> None:
    with pytest.raises(UsageError, match=r"^no run 99 in sqlite .*runs\.db$"):
        select(store, "99")
    with pytest.raises(UsageError, match="no run 11, 12 in"):
        select(store, "9-12")


@pytest.mark.parametrize(("spec", "message"), [
    ("5-3", "runs backwards; write 3-5"),
    ("qos", "'qos' is not a condition; a selection is run ids"),
    ("3,qos=on", "'3' is not a condition; a selection is run ids"),
    ("qos=on,qos=off", "qos is given twice"),
    ("qos=", r"item 'qos=': no value after '='"),
])
def test_bad_specs(store: Store, spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        select(store, spec)


def test_pair(store: Store) -> None:
    assert select_pair(store, "qos=off,test=bulk", "qos=on,test=bulk") == ([1, 2], [3, 4, 10])


def test_empty_side_names_the_spec_the_store_and_what_exists(store: Store) -> None:
    with pytest.raises(UsageError) as exc:
        select_pair(store, "qos=off", "qos=maybe")
    assert str(exc.value).startswith("no runs match 'qos=maybe' in sqlite ")
    assert "(qos takes off, on)" in str(exc.value)
    with pytest.raises(UsageError, match="no run has colour"):
        select_pair(store, "colour=red", "qos=on")
    with pytest.raises(UsageError, match="only failed or interrupted runs do"):
        select_pair(store, "qos=off", "note=cable")


def test_overlapping_sides_name_the_shared_runs(store: Store) -> None:
    with pytest.raises(UsageError, match=r"'qos=on' and 'test=bulk' overlap: both hold run "
                                         r"3, 4, 10;"):
        select_pair(store, "qos=on", "test=bulk")
    with pytest.raises(UsageError, match="both hold run 2;"):
        select_pair(store, "1-2", "2,3")


def test_several_selections_add_their_runs_in_the_order_given(store: Store) -> None:
    # Run 3 first, as written; then qos=off,test=ping's 5 and 6, which 5-6 names again.
    assert select_many(store, ["3", "qos=off,test=ping", "5-6"]) == [3, 5, 6]
    assert select_many(store, ["10", "version=v2", "qos=off"]) == [10, 1, 2, 5, 6]
    with pytest.raises(UsageError, match="no runs match 'qos=maybe'"):
        select_many(store, ["1", "qos=maybe"])
    with pytest.raises(UsageError, match="selects more than 3 runs"):
        select_many(store, ["1-2", "5-6"], limit=3)


def test_a_one_run_selection(store: Store) -> None:
    assert select_one(store, "7") == 7
    assert select_one(store, "wg=true") == 10
    with pytest.raises(UsageError, match=r"RUN 'version=v1,test=ping' selects 4 runs \(5, 6, "
                                         r"7, 8\); this command takes one"):
        select_one(store, "version=v1,test=ping")


def test_an_unknown_key_or_value_lists_the_known_ones(store: Store) -> None:
    with pytest.raises(UsageError) as exc:
        select(store, "hops=3")
    assert str(exc.value).endswith("(hops takes 2)")
    with pytest.raises(UsageError) as exc:
        select(store, "test=bulk,qos=of")
    assert str(exc.value).endswith("(qos takes off, on)")
    with pytest.raises(UsageError) as exc:
        select(store, "hop=2")
    assert str(exc.value).endswith(
        "(no run has hop; the keys are the columns experiment, experiment_id, id, kind, "
        "status, test and the runs' labels and variant keys: hops, note, qos, version, wg)")
    with pytest.raises(UsageError, match=r"\(wg takes true\)"):
        select(store, "wg=yes")     # stored as "true" and "True": shown as the file writes it
