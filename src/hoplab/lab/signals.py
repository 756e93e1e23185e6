"""Signals while a lab is built, used or taken down.

`kill` (SIGTERM) and a closed terminal (SIGHUP) unwind like Ctrl-C, so whatever
was built is removed; and once removal has begun, no further signal may cut
it short, or the lab would be left half there.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def terminate_as_interrupt(*, shield_after_first: bool = False) -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt as SIGINT does. With
    shield_after_first, the first of the three also has the others ignored from then
    on, past the end of the block: the unwinding it starts (stopping tools, storing
    what was measured, taking the lab down, saying so, exiting 130) runs to its end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        nonlocal fired
        if shield_after_first:
            fired = True
            for sig in _STOPS:
                signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signum}")

    sigs = _STOPS if shield_after_first else (signal.SIGTERM, signal.SIGHUP)
    old = {sig: signal.signal(sig, interrupt) for sig in sigs}
    try:
        yield
    finally:
        if not fired:
            for sig, handler in old.items():
                signal.signal(sig, handler)


@contextmanager
def shielded() -> Iterator[None]:
    """Ignore SIGINT, SIGTERM and SIGHUP for the block: a second Ctrl-C must not
    abandon a half-done teardown."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _STOPS}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
