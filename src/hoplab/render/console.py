"""A rich Console for hoplab's tables."""

from __future__ import annotations

from rich.console import Console

# Piped into a file or a CI log there is no terminal width; rich would then assume 80
# columns and fold every figure onto three lines.
PIPE_WIDTH = 140


def console(*, stderr: bool = False) -> Console:
    c = Console(stderr=stderr)
    if not c.is_terminal:
        c = Console(stderr=stderr, width=max(PIPE_WIDTH, c.width))
    return c
