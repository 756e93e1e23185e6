"""Errors that reach the user as one clear line and an exit code."""

from __future__ import annotations


class HoplabError(Exception):
    """An error the user can act on; the CLI prints it without a traceback."""

    exit_code = 1


class UsageError(HoplabError):
    """Bad input: a file, a key, an argument. Nothing was built."""

    exit_code = 2


class SpecError(UsageError):
    """A lab or experiment file is invalid. Names the file, the line and the key."""

    def __init__(self, message: str, *, file: str, key: str | None = None,
                 line: int | None = None) -> None:
        self.file = file
        self.key = key
        self.line = line
        self.message = message
        where = file if line is None else f"{file}:{line}"
        what = f" {key}:" if key else ""
        super().__init__(f"{where}:{what} {message}")


class CapabilityError(UsageError):
    """The machine lacks a kernel feature or tool that the input asks for."""


class LabError(HoplabError):
    """Building, using or tearing down a lab failed."""


class Cancelled(KeyboardInterrupt):
    """A run stopped because its job was cancelled (`hoplab fleet cancel`): unwound as an
    interrupt is, and stored as cancelled."""
