"""One lock per lab name, held while a lab of that name is built, taken down or cleaned.

Two `lab up` of one name raced: both passed the checks that the lab and its namespaces
do not exist before either created one, and the loser's teardown deleted every namespace
in its record, the winner's included. With the lock the second one is refused at once.

The lock is flock(2) on RUN_DIR/locks/NAME.lock: the kernel drops it when its holder
exits, however it exits, so a killed build never leaves a lab locked. The files are
never deleted (a lock file removed while held lets a second holder in on a new file);
they are empty but for the holder's PID, and /run is emptied at boot.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hoplab.errors import UsageError
from hoplab.lab import where

LOCKS_DIR = Path(where.RUN_DIR) / "locks"


class LabBusy(UsageError):
    """Another process holds the lab's lock: it is building or removing that lab."""


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


@contextmanager
def lab_lock(name: str) -> Iterator[None]:
    """Hold lab `name`'s lock for the block; LabBusy (exit 2) at once if another process
    holds it. Not reentrant: a process takes it once per lab at a time."""
    LOCKS_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCKS_DIR / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabBusy(f"lab {name!r} is being built or taken down by another hoplab "
                          f"process{_holder(fd)}; try again once it has finished") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        # Closing the descriptor releases the lock.
        os.close(fd)
