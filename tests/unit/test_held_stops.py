"""A stop signal inside stops_held reaches the handler of the moment at the block's end,
once, after everything in the block has run; the dispositions are put back. Signals are
raised with signal.raise_signal, whose handler runs before it returns."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from hoplab.held_stops import stops_held
from hoplab.lab.signals import terminate_as_interrupt

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def dispositions() -> Iterator[None]:
    mine = {sig: signal.getsignal(sig) for sig in STOPS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for sig, handler in mine.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def test_a_stop_inside_is_raised_at_the_end_after_the_block() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt, match="signal 1"), terminate_as_interrupt(), \
            stops_held():
        signal.raise_signal(signal.SIGHUP)
        done.append("recorded")
    assert done == ["recorded"]


def test_nested_blocks_deliver_at_the_outermost_end() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), stops_held():
        with stops_held():
            signal.raise_signal(signal.SIGINT)
            done.append("inner")
        done.append("outer")
    assert done == ["inner", "outer"]


def test_handlers_are_put_back_and_an_ignored_stop_stays_ignored() -> None:
    before = {sig: signal.getsignal(sig) for sig in STOPS}
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with stops_held():
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) == before[signal.SIGINT]


def test_a_handler_that_does_not_raise_hears_of_each_stop() -> None:
    heard: list[int] = []
    signal.signal(signal.SIGHUP, lambda signum, _frame: heard.append(signum))
    with stops_held():
        signal.raise_signal(signal.SIGHUP)
        signal.raise_signal(signal.SIGHUP)
        assert heard == []
    assert heard == [signal.SIGHUP, signal.SIGHUP]
