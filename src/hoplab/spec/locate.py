"""Line numbers for keys of a TOML document.

tomllib returns plain dicts with no positions, yet every error we report must
name a line. This module re-scans the source with a small tolerant scanner
that understands just enough TOML (headers, dotted and quoted keys, strings,
arrays, inline tables, comments) to map each key path to the line that
defines it. It never raises: on input it cannot follow it returns what it has
mapped so far, and lookups fall back to the nearest enclosing table.

Key paths use strings for table keys and ints for array positions, so the
third ``[[links]]`` entry's rate is ``("links", 2, "rate")``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from contextlib import suppress

Path = tuple[str | int, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SYNTAX_AT = re.compile(r"\s*\(at line (\d+), column \d+\)\s*$")
_SYNTAX_END = re.compile(r"\s*\(at end of document\)\s*$")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\",
            "e": "\x1b"}


class _Scanner:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.newlines = [k for k, c in enumerate(text) if c == "\n"]
        self.lines: dict[Path, int] = {}
        # Paths seen only as a prefix of a longer key; an explicit header may claim them.
        self.implicit: set[Path] = set()
        # For each array of tables, the index of its latest [[entry]].
        self.aot: dict[Path, int] = {}
        self.table: Path = ()

    def line_at(self, pos: int) -> int:
        return bisect_left(self.newlines, pos) + 1

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def record(self, path: Path, pos: int, *, explicit: bool = True) -> None:
        for k in range(1, len(path)):
            if path[:k] not in self.lines:
                self.lines[path[:k]] = self.line_at(pos)
                self.implicit.add(path[:k])
        if path not in self.lines or (explicit and path in self.implicit):
            self.lines[path] = self.line_at(pos)
            self.implicit.discard(path)

    def skip_ws(self, newlines: bool) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            else:
                return

    def scan(self) -> dict[Path, int]:
        # On input we cannot follow, keep the lines mapped so far.
        with suppress(IndexError, ValueError):
            self._document()
        return self.lines

    def _document(self) -> None:
        while True:
            self.skip_ws(newlines=True)
            if self.i >= len(self.s):
                return
            start = self.i
            if self.s.startswith("[[", self.i):
                self._array_header()
            elif self.peek() == "[":
                self._table_header()
            else:
                self._keyval(self.table)
            # Whatever is left on the line (a comment, or junk) is not ours to judge.
            while self.i < len(self.s) and self.s[self.i] != "\n":
                self.i += 1
            if self.i == start:
                self.i += 1

    def _resolve(self, parts: Sequence[str]) -> Path:
        path: Path = ()
        for part in parts:
            path += (part,)
            if path in self.aot:
                path += (self.aot[path],)
        return path

    def _array_header(self) -> None:
        pos = self.i
        self.i += 2
        parts = self._key()
        prefix = self._resolve(parts[:-1])
        array = (*prefix, parts[-1])
        index = self.aot.get(array, -1) + 1
        self.aot[array] = index
        self.table = (*array, index)
        self.record(array, pos, explicit=False)
        self.record(self.table, pos)

    def _table_header(self) -> None:
        pos = self.i
        self.i += 1
        self.table = self._resolve(self._key())
        self.record(self.table, pos)

    def _keyval(self, table: Path) -> None:
        pos = self.i
        path = table + tuple(self._key())
        self.skip_ws(newlines=False)
        if self.peek() != "=":
            raise ValueError("expected '='")
        self.i += 1
        self.record(path, pos)
        self._value(path)

    def _key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self.skip_ws(newlines=False)
            c = self.peek()
            if c == '"':
                parts.append(self._basic_string())
            elif c == "'":
                end = self.s.index("'", self.i + 1)
                parts.append(self.s[self.i + 1 : end])
                self.i = end + 1
            else:
                m = _BARE_KEY.match(self.s, self.i)
                if m is None:
                    raise ValueError("expected a key")
                parts.append(m.group())
                self.i = m.end()
            self.skip_ws(newlines=False)
            if self.peek() != ".":
                return parts
            self.i += 1

    def _basic_string(self) -> str:
        """Decode a one-line "..." string starting at self.i; leave i after it."""
        out: list[str] = []
        self.i += 1
        while True:
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                return "".join(out)
            if c == "\n":
                raise ValueError("unterminated string")
            if c == "\\":
                e = self.s[self.i + 1]
                if e in "uU":
                    width = 4 if e == "u" else 8
                    out.append(chr(int(self.s[self.i + 2 : self.i + 2 + width], 16)))
                    self.i += 2 + width
                    continue
                out.append(_ESCAPES.get(e, e))
                self.i += 2
                continue
            out.append(c)
            self.i += 1

    def _value(self, path: Path) -> None:
        self.skip_ws(newlines=False)
        s, i = self.s, self.i
        if s.startswith('"""', i) or s.startswith("'''", i):
            self._multiline_string(s[i : i + 3])
        elif s[i] == '"':
            self._basic_string()
        elif s[i] == "'":
            self.i = s.index("'", i + 1) + 1
        elif s[i] == "[":
            self._array(path)
        elif s[i] == "{":
            self._inline_table(path)
        else:
            while self.i < len(s) and s[self.i] not in ",]}\n#":
                self.i += 1

    def _multiline_string(self, quote: str) -> None:
        self.i += 3
        while True:
            if self.s[self.i] == "\\" and quote == '"""':
                self.i += 2
            elif self.s.startswith(quote, self.i):
                self.i += 3
                # Up to two quote characters may sit just before the closing delimiter.
                while self.peek() == quote[0]:
                    self.i += 1
                return
            else:
                self.i += 1

    def _array(self, path: Path) -> None:
        self.i += 1
        index = 0
        while True:
            self.skip_ws(newlines=True)
            if self.peek() == "]":
                self.i += 1
                return
            self.record((*path, index), self.i)
            self._value((*path, index))
            self.skip_ws(newlines=True)
            if self.peek() == ",":
                self.i += 1
                index += 1
            elif self.peek() == "]":
                self.i += 1
                return
            else:
                raise ValueError("expected ',' or ']'")

    def _inline_table(self, path: Path) -> None:
        self.i += 1
        while True:
            # Inline tables are one line in TOML 1.0; accepting newlines costs nothing.
            self.skip_ws(newlines=True)
            if self.peek() == "}":
                self.i += 1
                return
            self._keyval(path)
            self.skip_ws(newlines=True)
            if self.peek() == ",":
                self.i += 1
            elif self.peek() == "}":
                self.i += 1
                return
            else:
                raise ValueError("expected ',' or '}'")


class Locator:
    """Maps key paths of one TOML source to 1-based line numbers."""

    def __init__(self, text: str) -> None:
        self.lines = _Scanner(text).scan()

    def line(self, path: Sequence[str | int]) -> int | None:
        """The line defining `path`, else of its nearest enclosing key or table, else None."""
        key: Path = tuple(path)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return None


def locate(text: str, path: Sequence[str | int]) -> int | None:
    """One-off lookup; build a Locator to look up many paths in the same text."""
    return Locator(text).line(path)


def split_syntax_error(message: str, text: str) -> tuple[str, int | None]:
    """Split a tomllib error message into its text and the line it names."""
    m = _SYNTAX_AT.search(message)
    if m is not None:
        return message[: m.start()], int(m.group(1))
    m = _SYNTAX_END.search(message)
    if m is not None:
        last = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        return message[: m.start()], max(last, 1)
    return message, None
