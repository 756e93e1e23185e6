"""Argument types for argparse built on hoplab.numbers, so that a bad number is refused
by the parser (usage line, exit 2) with the same words the dashboard uses."""

from __future__ import annotations

import argparse

from hoplab import numbers
from hoplab.errors import UsageError


def run_id(text: str) -> int:
    try:
        return numbers.run_id(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
