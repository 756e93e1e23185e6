"""A rich Console for hoplab's tables."""

from __future__ import annotations

from rich.console import Console

# Piped into a file or a CI log there is no terminal width; rich would then assume 80
# columns and fold every figure onto three lines.
PIPE_WIDTH = 140


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # `hoplab ... | head` closed the pipe. rich would exit 1; the command line's one
        # handler (cli/main.py) ends every command quietly with 0 instead.
        self.quiet = True
        raise BrokenPipeError


def console(*, stderr: bool = False) -> Console:
    c = _Console(stderr=stderr)
    if not c.is_terminal:
        c = _Console(stderr=stderr, width=max(PIPE_WIDTH, c.width))
    return c
