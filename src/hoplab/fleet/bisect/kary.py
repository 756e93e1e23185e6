"""The search `hoplab bisect run --fleet` makes: k commits a round on k benches, a
(k+1)-ary search instead of git bisect's binary one.

The commits from good to bad along the first-parent line are indices 0 (good, known)
to n (bad, known). Each round tests up to k untested commits that cut the range left
into k + 1 near-equal parts; each answers as `hoplab bisect check` does for git: 0
(like good), 1 (like bad), 125 (cannot tell). The range then narrows to the last good
index below the first bad one. 100 commits on 3 benches take 4 rounds, not git's 7:
ceil(log4(100)) against ceil(log2(100)).

A commit that cannot be told is not tested again; the probes move to its neighbours.
When only such commits lie between the last good and the first bad, the answer is
that range (git's "only skipped commits left to test"). After GIVE_UP commits could
not be told the search stops (128), as `bisect check` makes git stop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128
GIVE_UP = 3                 # as run/bisect.py: commits not told before the search stops


@dataclass
class Search:
    n: int                                  # index of bad; good is 0
    lo: int = 0                             # the last index known good
    hi: int = -1                            # the first index known bad
    skipped: set[int] = field(default_factory=set)
    rounds: list[dict[int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"a range of {self.n} commits has nothing to search")
        if self.hi < 0:
            self.hi = self.n

    @property
    def done(self) -> bool:
        return not self.probes(1) or len(self.skipped) >= GIVE_UP

    def probes(self, k: int) -> list[int]:
        """Up to `k` untested indices strictly between lo and hi, cutting it evenly;
        a skipped index gives way to the nearest untested one."""
        free = [i for i in range(self.lo + 1, self.hi) if i not in self.skipped]
        if not free or k < 1:
            return []
        if len(free) <= k:
            return free
        # The (k + 1)-quantiles of the untested indices: equal parts of what is left.
        return sorted({free[(j * len(free)) // (k + 1)] for j in range(1, k + 1)})

    def answer(self, found: dict[int, int]) -> None:
        """Narrow the range by one round's answers (index -> 0, 1 or 125)."""
        self.rounds.append(dict(found))
        for i, a in found.items():
            if not self.lo < i < self.hi:
                raise ValueError(f"commit {i} is outside the range {self.lo}..{self.hi}")
            if a not in (GOOD, BAD, SKIP):
                raise ValueError(f"commit {i}: answer {a} is not 0, 1 or 125")
        bad = [i for i, a in found.items() if a == BAD]
        self.hi = min([self.hi, *bad])
        good = [i for i, a in found.items() if a == GOOD and i < self.hi]
        self.lo = max([self.lo, *good])
        self.skipped |= {i for i, a in found.items() if a == SKIP}

    def result(self) -> tuple[int, int, int]:
        """(exit code, last good, first bad): 0 with hi the first bad commit when lo and
        hi are adjacent; 125 when only untold commits lie between them; 128 when the
        search gave up."""
        if self.hi == self.lo + 1:
            return GOOD, self.lo, self.hi
        if self.probes(1):
            return ABORT, self.lo, self.hi
        return SKIP, self.lo, self.hi


def search(n: int, k: int, test: Callable[[Sequence[int]], dict[int, int]]) -> Search:
    """Run the search over indices 0..n with k benches; `test` measures one round's
    commits (each on its own bench) and answers for each."""
    s = Search(n)
    while not s.done:
        s.answer(test(s.probes(k)))
    return s
