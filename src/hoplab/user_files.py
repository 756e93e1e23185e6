"""Reading a file that a user's input names (an experiment, its lab, a trace, a script
it bundles): a regular file only, and at most a bounded number of bytes.

A FIFO named as a trace would block its reader for ever, and a 2 GB sparse file would be
read whole into memory; both are refused before a byte is read. The bound is
DEFAULT_LIMIT, or HOPLAB_MAX_FILE_SIZE's (bytes, or with a K, M or G suffix) for those
who need more; it holds for each file, and for a fleet bundle's files together.

    data = read_bytes(Path("trace.txt"))       # FileRefused (a ValueError), OSError
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from hoplab.errors import UsageError

ENV = "HOPLAB_MAX_FILE_SIZE"
DEFAULT_LIMIT = 64 * 2**20
_SIZE = re.compile(r"(\d+)\s*([KMG]?)i?B?", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


class FileRefused(ValueError):
    """Not a regular file, or larger than the limit: the message says which."""


def limit() -> int:
    """The most bytes a named file (and a bundle) may hold."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_LIMIT
    m = _SIZE.fullmatch(raw)
    if m is None or int(m.group(1)) <= 0:
        raise UsageError(f"{ENV}={raw!r}: expected a size in bytes such as 67108864 or "
                         "256M (docs/fleet.md)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def too_large(n: int) -> FileRefused:
    bound = limit()
    return FileRefused(f"{size_text(n)} is over the {size_text(bound)} limit for a file "
                       f"hoplab reads (set {ENV} to allow more)")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise FileRefused(f"{_kind(mode)}, not a regular file")


def read_bytes(path: Path) -> bytes:
    """The file's content: FileRefused if it is not a regular file or is over limit()."""
    bound = limit()
    # O_NONBLOCK: opening a FIFO must not wait for a writer before fstat can refuse it.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        check_regular(info.st_mode)
        if info.st_size > bound:
            raise too_large(info.st_size)
        chunks, got = [], 0
        while chunk := os.read(fd, min(2**20, bound + 1 - got)):
            chunks.append(chunk)
            got += len(chunk)
            if got > bound:  # it grew while read
                raise too_large(got)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path) -> str:
    """read_bytes as UTF-8 (UnicodeDecodeError names a position, never the text)."""
    return read_bytes(path).decode("utf-8")
