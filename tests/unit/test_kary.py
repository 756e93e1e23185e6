"""The fleet bisection's search (fleet/bisect/kary.py): k commits a round, the same 0/1/125
answers as `hoplab bisect check` gives git."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest

from hoplab.fleet.bisect.kary import ABORT, GOOD, SKIP, Search, search


def _oracle(first_bad: int, untold: frozenset[int] = frozenset()
            ) -> Callable[[Sequence[int]], dict[int, int]]:
    def test(commits: Sequence[int]) -> dict[int, int]:
        return {c: SKIP if c in untold else GOOD if c < first_bad else 1 for c in commits}
    return test


@pytest.mark.parametrize(("k", "rounds"), [(1, 7), (2, 5), (3, 4), (9, 2)])
def test_every_first_bad_commit_of_100_found_within_the_rounds(k, rounds):
    # ceil(log_{k+1}(100)): 100 commits on 3 benches in 4 rounds, binary in 7.
    assert rounds == math.ceil(math.log(100, k + 1) - 1e-9)
    for first_bad in range(1, 101):
        s = search(100, k, _oracle(first_bad))
        assert s.result() == (GOOD, first_bad - 1, first_bad)
        assert len(s.rounds) <= rounds
        assert all(len(r) <= k for r in s.rounds)


def test_a_commit_that_cannot_be_told_gives_way_to_its_neighbours():
    s = search(100, 3, _oracle(60, frozenset({50})))
    assert s.result() == (GOOD, 59, 60) and 50 in s.skipped


def test_only_untold_commits_between_good_and_bad_is_a_range():
    s = search(100, 3, _oracle(50, frozenset({49})))
    assert s.result() == (SKIP, 48, 50)


def test_gives_up_after_three_commits_not_told():
    s = search(100, 1, _oracle(90, frozenset(range(40, 100))))
    assert len(s.skipped) == 3 and s.result()[0] == ABORT


def test_answers_outside_the_range_or_unknown_are_refused():
    s = Search(10)
    with pytest.raises(ValueError, match="outside"):
        s.answer({10: GOOD})
    with pytest.raises(ValueError, match="not 0, 1 or 125"):
        s.answer({5: 2})
