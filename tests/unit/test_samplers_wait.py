"""Samplers.sampled_since: a caller waits until the sampled counters include what it did
before a moment, instead of sleeping for a sample to come (this machine, as any user)."""

from __future__ import annotations

import time

from hoplab.nodes.netns_exec import NetnsExecutor
from hoplab.samplers.runner import Samplers, Target


def test_after_the_wait_every_series_has_a_sample_begun_since() -> None:
    zero = time.time()
    smp = Samplers([Target("host", NetnsExecutor("host", None), frozenset({"ifaces"}))],
                   cpu=True, clock_zero=zero, interval_s=0.1)
    with smp:
        # A moment no sample can have begun at yet: the wait gives up, and says so.
        began = time.monotonic()
        assert not smp.sampled_since(time.time() - zero + 60, 0.3)
        assert 0.3 <= time.monotonic() - began < 2
        mark = time.time() - zero
        assert smp.sampled_since(mark, 10.0)
    series = smp.stop()  # at once: no later sample than the one waited for
    assert smp.errors == []
    # Each series is stamped when its sample was read, after the read began: at mark or
    # later, in the host's CPU series and this namespace's interfaces alike.
    assert {s.name for s in series} >= {"cpu.idle", "iface.rx_bytes"}
    assert all(max(s.t) >= mark for s in series)
