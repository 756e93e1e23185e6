"""Two sides of profiles -> their top symbols by self time side by side, and what changed.

Seed 002 put `perf top` of the builds on each side of a step next to each other and
could not tell which differences mattered. Here each side is one profile or several
(the repetitions of a build). A symbol's share on a side is the mean of its share of
each profile's samples, so every profile weighs the same whatever its length. Where
both sides have several profiles, each listed symbol's per-profile shares are
compared with a Mann-Whitney rank test, and Benjamini-Hochberg across the listed
symbols keeps the expected share of false "beyond noise" calls at FDR.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from hoplab.analysis.ranks import benjamini_hochberg, rank_p
from hoplab.analysis.ranks import min_p as min_p_value
from hoplab.profile import analyze

FDR = 0.05


@dataclass(frozen=True)
class SymbolChange:
    symbol: str
    a_pct: float                     # mean share of A's profiles' samples
    b_pct: float
    a_values: tuple[float, ...]      # the share in each profile
    b_values: tuple[float, ...]
    p: float | None                  # None: a side has one profile, no test
    beyond_noise: bool | None        # after Benjamini-Hochberg; None without a test

    @property
    def change_pts(self) -> float:
        return self.b_pct - self.a_pct


@dataclass(frozen=True)
class ProfileDiff:
    a_samples: tuple[int, ...]       # per profile
    b_samples: tuple[int, ...]
    a_top: tuple[tuple[str, float], ...]
    b_top: tuple[tuple[str, float], ...]
    symbols: tuple[SymbolChange, ...]     # every symbol of either top list
    min_p: float                     # the smallest p the test can give with these counts

    @property
    def tested(self) -> bool:
        return len(self.a_samples) > 1 and len(self.b_samples) > 1

    @property
    def can_decide(self) -> bool:
        """Whether these numbers of profiles can show a change at all (with one symbol
        tested; Benjamini-Hochberg asks for smaller p with more)."""
        return self.tested and self.min_p <= FDR


def shares(profiles: Sequence[Counter[str]]) -> list[dict[str, float]]:
    """Each profile's self time per symbol, as % of its samples."""
    out = []
    for stacks in profiles:
        total = analyze.samples(stacks)
        out.append({s: 100 * c / total for s, c in analyze.self_time(stacks).items()}
                   if total else {})
    return out


def _mean_top(per: list[dict[str, float]], n: int) -> list[tuple[str, float]]:
    mean: dict[str, float] = {}
    for share in per:
        for sym, pct in share.items():
            mean[sym] = mean.get(sym, 0.0) + pct / len(per)
    # Ties in share go by name, so the table does not depend on dict order.
    return sorted(mean.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def diff(a: Sequence[Counter[str]], b: Sequence[Counter[str]], top: int = 20) -> ProfileDiff:
    """A and B: the folded stacks of each side's profiles (one or more each)."""
    if not a or not b:
        raise ValueError("each side needs one profile at least")
    pa, pb = shares(a), shares(b)
    a_top, b_top = _mean_top(pa, top), _mean_top(pb, top)
    listed = list(dict.fromkeys([s for s, _ in a_top] + [s for s, _ in b_top]))
    tested = len(a) > 1 and len(b) > 1
    rows = []
    for sym in listed:
        va = tuple(p.get(sym, 0.0) for p in pa)
        vb = tuple(p.get(sym, 0.0) for p in pb)
        rows.append((sym, va, vb, rank_p(va, vb) if tested else None))
    found = benjamini_hochberg([r[3] for r in rows if r[3] is not None]) if tested else []
    symbols = tuple(
        SymbolChange(sym, math.fsum(va) / len(va), math.fsum(vb) / len(vb), va, vb, p,
                     found[i] if tested else None)
        for i, (sym, va, vb, p) in enumerate(rows))
    return ProfileDiff(
        a_samples=tuple(analyze.samples(s) for s in a),
        b_samples=tuple(analyze.samples(s) for s in b),
        a_top=tuple(a_top), b_top=tuple(b_top),
        symbols=tuple(sorted(symbols, key=lambda c: (-abs(c.change_pts), c.symbol))),
        min_p=min_p_value(len(a), len(b)))
