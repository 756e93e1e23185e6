"""Whole numbers a user writes: a run id, a page, a limit. The command line, the store's
id filter and the dashboard read them here, so they accept the same text and refuse the
same text with the same UsageError (exit 2 on the command line, 400 on the dashboard).

    run_id("12")                      -> 12
    whole("3", "page", least=1)       -> 3
    run_id("²"), run_id("9" * 5000), run_id("9223372036854775808")   -> UsageError

Only ASCII digits count: str.isdigit() also accepts "²" and "٣", which int() refuses or
reads; and a number is checked against its bound by its length before int() reads it,
since int() of more than 4,300 digits raises ValueError and each digit costs time.
"""

from __future__ import annotations

import re

from hoplab.errors import UsageError

# The largest id a store can hold or a query may name: SQLite's and PostgreSQL's 64-bit
# integers. A bigger number bound in a query is an error, not "no such run".
MAX_ID = 2**63 - 1

_DIGITS = re.compile(r"[0-9]+")
_SHOWN = 24                 # characters of a refused value quoted in the message


def _shown(text: str) -> str:
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN - 4]!r}… ({len(text):,} characters)"


def whole(text: str, what: str, *, least: int = 0, most: int = MAX_ID) -> int:
    """`text` (spaces around it ignored) as a whole number from `least` to `most`.

    UsageError naming `what` (e.g. "page", "--limit") and the value for anything else:
    no digits, a sign, a non-ASCII digit, or a number outside the bounds."""
    t = text.strip()
    if not _DIGITS.fullmatch(t):
        raise UsageError(f"{what} {_shown(t)}: expected a whole number (digits 0-9)")
    digits = t.lstrip("0") or "0"
    if len(digits) > len(str(most)) or int(digits) > most:
        raise UsageError(f"{what} {_shown(t)}: at most {most}")
    value = int(digits)
    if value < least:
        raise UsageError(f"{what} {_shown(t)}: at least {least}")
    return value


def run_id(text: str, what: str = "run id") -> int:
    """A run id: a whole number a store's 64-bit id column can hold."""
    return whole(text, what, least=0, most=MAX_ID)


def is_run_id(value: object) -> bool:
    """Whether `value` is an int a store can look up (a bigger one overflows the driver)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID
