"""Blocks that a stop signal may not cut in two.

A stop signal's Python handler (a KeyboardInterrupt, hoplab.lab.signals) runs at any
bytecode of the main thread, also inside subprocess.Popen after its fork: Popen then
raises and its child runs on, known to no one. A process started and recorded inside
`stops_held` is always recorded: a SIGINT, SIGTERM or SIGHUP that arrives in the block
is held and handed to the handler of the moment at its end.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


@contextmanager
def stops_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP for the block (only the main thread runs handlers,
    so elsewhere this does nothing); deliver what arrived when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        held.append(signum)

    before: dict[signal.Signals, _Handler] = {}
    try:
        # Inside the try: a stop that lands between two of these still finds the ones
        # already replaced put back.
        for sig in _STOPS:
            before[sig] = signal.signal(sig, hold)
        yield
    finally:
        for sig, handler in before.items():
            # None: set outside Python, which cannot put it back; default then.
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for signum in held:
            _deliver(signum)


def _deliver(signum: int) -> None:
    """As the signal would have been delivered outside the block; a handler that raises
    (KeyboardInterrupt) ends the delivery there."""
    handler = signal.getsignal(signum)
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)
