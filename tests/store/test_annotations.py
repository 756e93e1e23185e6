"""Annotations in the store (schema 4), on SQLite and PostgreSQL; and the figures the
dashboard's home reads of a whole store (runs_with_figures, figures_of, state)."""

from __future__ import annotations

import pytest

from hoplab.errors import UsageError
from hoplab.store import Store
from tests.helpers.runs import make_run


def test_annotations_are_kept_listed_and_removed(store: Store) -> None:
    first = store.add_annotation("kernel 6.1 -> 6.6", key="version", value="v45")
    second = store.add_annotation("cable swapped", at=1_763_800_000.5)
    notes = store.annotations()
    assert [(n.id, n.key, n.value, n.at, n.text) for n in notes] == [
        (first, "version", "v45", None, "kernel 6.1 -> 6.6"),
        (second, None, None, 1_763_800_000.5, "cable swapped")]
    assert notes[0].where == "version=v45"
    gone = store.remove_annotation(first)
    assert gone.text == "kernel 6.1 -> 6.6"
    assert [n.id for n in store.annotations()] == [second]
    with pytest.raises(UsageError, match=f"no annotation {first} in .*annotate --list"):
        store.remove_annotation(first)


@pytest.mark.parametrize("kw", [
    {}, {"key": "version"}, {"key": "version", "value": "v1", "at": 1.0}, {"value": "v1"}])
def test_an_annotation_is_on_a_label_value_or_at_a_time(store: Store,
                                                        kw: dict[str, object]) -> None:
    with pytest.raises(UsageError, match=r"on a label value .* or at a time, one of them"):
        store.add_annotation("x", **kw)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="needs a text"):
        store.add_annotation("  ", at=1.0)
    assert store.annotations() == []


def test_figures_of_a_whole_store(store: Store) -> None:
    assert store.state() == (0, 0)
    ids = [store.save_run(make_run(rep=r, variant={"hops": r, "wg": True},
                                   labels={"version": f"v{r}"}, goodput=1e6 * r,
                                   rtt_median=float(r), packets=5.0)) for r in (1, 2, 3)]
    store.save_run(make_run(status="failed", goodput=1.0))
    assert store.state() == (ids[-1] + 1, 4)
    runs = store.runs_with_figures({"goodput", "rtt_median"})
    assert [r.id for r in runs] == ids                      # finished runs only
    assert runs[1].variant == {"hops": 2, "wg": True} and runs[1].labels == {"version": "v2"}
    assert runs[1].metrics == {"goodput": 2e6, "rtt_median": 2.0}
    assert [r.id for r in store.runs_with_figures((), after=ids[0])] == ids[1:]
    assert [r.id for r in store.runs_with_figures({"goodput"}, filters={"wg": "true",
                                                                        "hops": "3"})] == \
        [ids[2]]
    assert store.figures_of(ids[:2], {"packets"}) == {ids[0]: {"packets": 5.0},
                                                      ids[1]: {"packets": 5.0}}
