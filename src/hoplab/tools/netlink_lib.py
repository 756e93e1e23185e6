"""pyroute2, imported once and whole before a thread uses it.

Samplers of several nodes start in threads at once, and each imported pyroute2 on first
use. pyroute2's modules import one another in a circle, and two threads importing that
circle at once get a partially initialised module or Python's import deadlock error:
a CI run's sampler failed with "cannot import name 'AsyncNetlinkSocket' from partially
initialized module 'pyroute2.netlink.nlsocket'", and a script of four threads importing
`pyroute2` and `pyroute2.netlink.diag` at once failed 20 times in 20 here. It is
imported on demand (about 0.1 s), not when hoplab starts, so that other commands do not
pay for it."""

from __future__ import annotations

import threading

_LOCK = threading.Lock()


def load() -> None:
    """Import what hoplab uses of pyroute2, under one lock: callers then import its
    names from modules that are whole."""
    with _LOCK:
        import pyroute2
        import pyroute2.netlink.diag  # noqa: F401
