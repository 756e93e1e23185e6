"""Folded stacks -> the figures people read: top symbols by self time, time by category.

Self time of a symbol is the samples whose leaf frame it is, as `perf report
--sort sym` and `perf top` show it. Categories come from an editable table of
symbol patterns (categories.toml, next to this module): it answers seed 001's
"is it WireGuard or the firewall?".
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hoplab.errors import SpecError

DEFAULT_TABLE = Path(__file__).with_name("categories.toml")
USER = "user space"
OTHER_KERNEL = "other kernel"
KERNEL_MARK = "_[k]"


@dataclass(frozen=True)
class Category:
    name: str
    patterns: tuple[re.Pattern[str], ...]


def load_categories(path: Path = DEFAULT_TABLE) -> list[Category]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SpecError(f"cannot read the category table: {e}", file=str(path)) from None
    out = []
    for i, entry in enumerate(data.get("category", [])):
        key = f"category[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise SpecError("each [[category]] needs name = \"...\"", file=str(path), key=key)
        pats = entry.get("patterns", [])
        if not isinstance(pats, list) or not all(isinstance(p, str) for p in pats):
            raise SpecError("patterns is an array of regular expressions", file=str(path),
                            key=f"{key}.patterns")
        try:
            compiled = tuple(re.compile(p) for p in pats)
        except re.error as e:
            raise SpecError(f"bad pattern: {e}", file=str(path), key=f"{key}.patterns") from None
        out.append(Category(entry["name"], compiled))
    return out


def _bare(frame: str) -> str:
    return frame[: -len(KERNEL_MARK)] if frame.endswith(KERNEL_MARK) else frame


def category_of(stack: str, table: list[Category]) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        name = _bare(frame)
        for cat in table:
            if any(p.search(name) for p in cat.patterns):
                return cat.name
    return OTHER_KERNEL if frames[-1].endswith(KERNEL_MARK) else USER


def categories(stacks: Counter[str], table: list[Category]) -> dict[str, float]:
    """Share (%) of samples per category, largest first."""
    total = sum(stacks.values())
    if not total:
        return {}
    acc: Counter[str] = Counter()
    for stack, count in stacks.items():
        acc[category_of(stack, table)] += count
    return {name: 100 * c / total for name, c in acc.most_common()}


def self_time(stacks: Counter[str]) -> Counter[str]:
    """Samples per symbol as a leaf frame (its self time)."""
    leaves: Counter[str] = Counter()
    for stack, count in stacks.items():
        leaf = stack.rsplit(";", 1)[-1]
        if ";" not in stack:
            leaf += " (no stack)"
        elif leaf.startswith("[") and leaf.endswith("]"):
            # perf names the binary when it has no symbol for the address (a stripped
            # binary, or a JIT without a perf map): say so rather than guess.
            leaf += " (no symbols)"
        leaves[leaf] += count
    return leaves


def top_symbols(stacks: Counter[str], n: int = 20) -> list[tuple[str, float]]:
    """The n symbols with the most self time, as (symbol, % of samples)."""
    total = sum(stacks.values())
    if not total:
        return []
    return [(sym, 100 * c / total) for sym, c in self_time(stacks).most_common(n)]


def samples(stacks: Counter[str]) -> int:
    return sum(stacks.values())
