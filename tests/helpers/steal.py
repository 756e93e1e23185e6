"""A pytest plugin: a test that failed while the hypervisor took this machine's CPU runs
again (twice at most), and says so.

This machine is itself a virtual machine. Its hypervisor now and then runs other guests
on its cores: /proc/stat's `steal` counts the time this one's vCPUs were ready and not
run. A lab test's known answer is a rate, a delay or a spacing measured in real time,
and a stolen stretch shifts it: in one fresh-clone run (0a62295) five lab tests failed,
each while 9 to 51 % of a core was stolen on average (5.6 % over the whole run, under
1 % in its quiet minutes), and each had passed in the earlier runs (docs/testing.md).

So a test whose call failed is run again when, during that call, the stolen CPU time
came to at least STOLEN_SHARE of one core over the call's wall time; a failure on a
quiet machine stands at once. Each run again is reported as a warning naming the test
and the share stolen, so a run that needed any says so in its summary; the last try's
outcome is the test's. tests/conftest.py loads this plugin for the whole suite.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from _pytest.runner import runtestprotocol

# Of one core, on average over the failed call: a quiet machine steals about nothing.
STOLEN_SHARE = 0.05
RERUNS = 2
_STAT = Path("/proc/stat")
_TICK = os.sysconf("SC_CLK_TCK")
_KEY = pytest.StashKey[float]()


class StolenCPU(pytest.PytestWarning):
    """A test ran again: it failed while the hypervisor took the CPU."""


def pytest_configure(config: pytest.Config) -> None:
    # Shown, not raised, where every other warning is an error (pyproject.toml).
    config.addinivalue_line("filterwarnings", f"always::{__name__}.StolenCPU")


def stolen_s(stat: str | None = None) -> float:
    """CPU time stolen from this machine since it booted, summed over its CPUs (the
    eighth figure of /proc/stat's `cpu` line); 0 where the kernel does not count it."""
    text = _STAT.read_text() if stat is None else stat
    fields = text.split("\n", 1)[0].split()
    return int(fields[8]) / _TICK if fields[0] == "cpu" and len(fields) > 8 else 0.0


def share(stolen: float, seconds: float) -> float:
    """Stolen CPU time as a share of one core over `seconds` of wall time."""
    return stolen / seconds if seconds > 0 else 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):  # type: ignore[no-untyped-def]
    before = stolen_s()
    try:
        yield
    finally:
        item.stash[_KEY] = stolen_s() - before


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    for attempt in range(RERUNS + 1):
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        item.stash[_KEY] = 0.0
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        call = next((r for r in reports if r.when == "call"), None)
        taken = share(item.stash[_KEY], call.duration) if call is not None else 0.0
        again = (attempt < RERUNS and call is not None and call.failed
                 and taken >= STOLEN_SHARE)
        if not again:
            for report in reports:
                item.ihook.pytest_runtest_logreport(report=report)
            item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
            return True
        warnings.warn(StolenCPU(
            f"{item.nodeid} failed while the hypervisor took {100 * taken:.0f} % of a core "
            f"(this machine's steal time): run again ({attempt + 1} of {RERUNS})"), stacklevel=1)
    raise AssertionError("unreachable")
