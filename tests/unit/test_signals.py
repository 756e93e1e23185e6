"""The shield of hoplab.lab.signals lasts as long as the unwinding it protects, and a
process that goes on (a test suite, a bench worker) gets its dispositions back: what it
starts later can be stopped, and a shell it starts can trap SIGINT. Signals are raised in
this process with signal.raise_signal, whose handler runs before it returns."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

from hoplab.lab.signals import shielded, terminate_as_interrupt, until_exit

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# A shell that traps SIGINT, then sends it to itself: 7 when the trap ran, 1 when the
# signal was ignored on entry (a non-interactive sh cannot trap it then).
TRAPS = ["sh", "-c", "trap 'exit 7' INT; kill -INT $$; exit 1"]


Handler = Callable[[int, FrameType | None], Any] | int | None


@pytest.fixture(autouse=True)
def dispositions() -> Iterator[dict[int, Handler]]:
    """Python's own at the start of each test, whatever this process was started with (a
    script's background job ignores SIGINT); this process's put back after, whatever the
    test left (until_exit leaves them ignored)."""
    mine = {sig: signal.getsignal(sig) for sig in STOPS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield now()
    for sig, handler in mine.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def now() -> dict[int, Handler]:
    return {sig: signal.getsignal(sig) for sig in STOPS}


def ignored_by_a_child() -> set[int]:
    """The signals a process started now begins with ignored (SigIgn of /proc/PID/status)."""
    status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True,
                            check=True).stdout
    mask = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("SigIgn:")),
               16)
    return {sig for sig in STOPS if mask >> (sig - 1) & 1}


def test_after_a_stop_the_dispositions_are_put_back(dispositions: dict[int, Handler]) -> None:
    with pytest.raises(KeyboardInterrupt, match="signal 15"), \
            terminate_as_interrupt(shield_after_first=True):
        try:
            signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt:
            # The unwinding: no signal cuts it short, nor the commands it runs.
            inside = now()
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGHUP)
            child_inside = ignored_by_a_child()
            raise
    assert inside == dict.fromkeys(STOPS, signal.SIG_IGN)
    assert child_inside == set(STOPS)
    assert now() == dispositions
    # What this process starts later begins with them at their defaults, and can trap them.
    assert ignored_by_a_child() == set()
    assert subprocess.run(TRAPS, check=False).returncode == 7


def test_the_shield_lasts_to_the_end_of_the_outermost_block(
        dispositions: dict[int, Handler]) -> None:
    """A stop inside an inner block is unwound through the outer one (bisect: a run's
    block inside the bisection's), shielded to its end."""
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
        try:
            with terminate_as_interrupt(shield_after_first=True):
                signal.raise_signal(signal.SIGHUP)
        except KeyboardInterrupt:
            between = now()
            # Entered while unwinding: no new interrupt, the shield stays.
            with terminate_as_interrupt(shield_after_first=True):
                signal.raise_signal(signal.SIGTERM)
            raise
    assert between == dict.fromkeys(STOPS, signal.SIG_IGN)
    assert now() == dispositions
    assert subprocess.run(TRAPS, check=False).returncode == 7


def test_no_stop_no_change(dispositions: dict[int, Handler]) -> None:
    with terminate_as_interrupt(shield_after_first=True):
        assert now() != dispositions
        with shielded():
            assert now() == dict.fromkeys(STOPS, signal.SIG_IGN)
    assert now() == dispositions
    with until_exit(), terminate_as_interrupt():
        pass
    assert now() == dispositions
    # A stop that is not a shield's (SIGTERM in a plain block) is not one either.
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt():
        signal.raise_signal(signal.SIGTERM)
    assert now() == dispositions


def test_a_command_stays_shielded_to_its_exit() -> None:
    """`hoplab run` or `lab up` stopped: after the blocks, it still says so and exits 130
    (hoplab.cli.main), and a signal then must not cut that short."""
    with pytest.raises(KeyboardInterrupt), until_exit(), \
            terminate_as_interrupt(shield_after_first=True):
        signal.raise_signal(signal.SIGTERM)
    assert now() == dict.fromkeys(STOPS, signal.SIG_IGN)
    # The next command of this process (a test suite's) starts afresh.
    with terminate_as_interrupt(shield_after_first=True):
        assert now() != dict.fromkeys(STOPS, signal.SIG_IGN)


def test_a_bench_hears_every_stop_in_a_build_and_a_teardown() -> None:
    """A bench (noting_stops) hears a SIGTERM where a lab is built (terminate_as_interrupt)
    and where one is taken down (shielded): the first only noted, not interrupting the
    build nor lost in the teardown; a stop it says interrupts does, in a build."""
    from hoplab.lab.signals import noting_stops

    heard: list[int] = []

    def note(signum: int) -> bool:
        heard.append(signum)
        return signum == signal.SIGINT

    with noting_stops(note):
        with terminate_as_interrupt(shield_after_first=True):
            signal.raise_signal(signal.SIGTERM)  # noted: the build goes on
        with shielded():
            signal.raise_signal(signal.SIGTERM)  # noted, though the teardown ignores it
        with pytest.raises(KeyboardInterrupt), terminate_as_interrupt(
                shield_after_first=True):
            signal.raise_signal(signal.SIGINT)
    assert heard == [signal.SIGTERM, signal.SIGTERM, signal.SIGINT]
    # Outside, the shield ignores stops as before.
    with shielded():
        signal.raise_signal(signal.SIGTERM)
    assert len(heard) == 3
