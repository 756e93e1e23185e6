"""Signals while a lab is built, used or taken down.

`kill` (SIGTERM) and a closed terminal (SIGHUP) unwind like Ctrl-C, so whatever
was built is removed; and once removal has begun, no further signal may cut
it short, or the lab would be left half there.

The shield lasts as long as the unwinding, and no longer: to the end of the outermost
block (the unwinding crosses the ends of inner ones), or for a command line's command,
whose process ends with it, to the exit. A process that goes on (a bench worker, a test
suite) gets its dispositions back, and what it starts later does not begin with the
three signals ignored: a non-interactive sh cannot trap a signal ignored on entry.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_Handler = Callable[[int, FrameType | None], object] | int | None

# The main thread's open blocks (terminate_as_interrupt, until_exit), whether a stop has
# fired in one of them, and the dispositions from before the outermost.
_open = 0
_fired = False
_before: dict[int, _Handler] = {}
# A process that goes on after a stop signal (a bench: hoplab worker) hears of every one,
# in a lab's build and teardown too: `_note` takes it first and answers whether it is to
# interrupt (else it is only noted: the bench stops after its run).
_note: Callable[[int], bool] | None = None
# And whether one breaks a shield: a bench taking its lab down after a first stop signal
# lets a second one interrupt the teardown (the lab is left for `hoplab clean`).
_breaks: Callable[[int], bool] | None = None
# How many shielded blocks the main thread is in.
_shields = 0


def quiet() -> bool:
    """Whether an interrupt now would cut a teardown or an unwinding short (a shield is
    up): one that can wait (a cancelled job's) waits."""
    return _shields > 0 or _fired


@contextmanager
def noting_stops(note: Callable[[int], bool],
                 breaks: Callable[[int], bool] | None = None) -> Iterator[None]:
    """For the block, every SIGINT, SIGTERM and SIGHUP goes to `note` first: where one
    would interrupt (terminate_as_interrupt), it does only if `note` says so; where one
    would be ignored (shielded), `note` still hears of it, and it interrupts if `breaks`
    (asked after `note`) says so."""
    global _note, _breaks
    _note, _breaks = note, breaks
    try:
        yield
    finally:
        _note, _breaks = None, None


@contextmanager
def _counted(*, to_exit: bool = False) -> Iterator[None]:
    global _open, _fired
    if _open == 0:
        _before.clear()
        _before.update({sig: signal.getsignal(sig) for sig in _STOPS})
    _open += 1
    try:
        yield
    finally:
        _open -= 1
        if _open == 0 and _fired:
            _fired = False
            if not to_exit:
                for sig, handler in _before.items():
                    # None: set outside Python, which cannot put it back; default then.
                    signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@contextmanager
def terminate_as_interrupt(*, shield_after_first: bool = False) -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt as SIGINT does. With
    shield_after_first, the first of the three also has all three ignored from then on,
    to the end of the outermost block (or the exit, inside until_exit): the unwinding it
    starts (stopping tools, storing what was measured, taking the lab down) runs to its
    end. Then they are what they were before that block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _fired:
        # Entered while unwinding: the shield stays.
        with _counted():
            yield
        return

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        global _fired
        if _note is not None and not _note(signum):
            return
        if shield_after_first:
            _fired = True
            for sig in _STOPS:
                signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signum}")

    sigs = _STOPS if shield_after_first else (signal.SIGTERM, signal.SIGHUP)
    with _counted():
        old = {sig: signal.signal(sig, interrupt) for sig in sigs}
        try:
            yield
        finally:
            if not _fired:
                for sig, handler in old.items():
                    signal.signal(sig, handler)


@contextmanager
def until_exit() -> Iterator[None]:
    """For a command line's command, whose process exits when it returns: a shield that
    fires inside stays to the exit (saying so and exiting 130 are part of the unwinding).
    Nothing changes while no signal comes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _counted(to_exit=True):
        yield


@contextmanager
def shielded() -> Iterator[None]:
    """Ignore SIGINT, SIGTERM and SIGHUP for the block: a second Ctrl-C must not
    abandon a half-done teardown (except where a bench's `breaks`, noting_stops, says
    a teardown of its own may be: it leaves the lab for `hoplab clean`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    def noted(signum: int, _frame: FrameType | None) -> None:
        if _note is not None:
            _note(signum)
        if _breaks is not None and _breaks(signum):
            raise KeyboardInterrupt(f"signal {signum}")

    global _shields
    ignore = signal.SIG_IGN if _note is None else noted
    old = {sig: signal.signal(sig, ignore) for sig in _STOPS}
    _shields += 1
    try:
        yield
    finally:
        _shields -= 1
        for sig, handler in old.items():
            signal.signal(sig, handler)
