"""Two levels of an RTT under load (issue 27: every rrul run of the quickstart fell at
15 s from about 60 ms to 17 ms, and its "loaded RTT 36.0 ms (median)" lay in the gap).
The step is the machine's TCP, not hoplab: the default congestion control there is BBR,
whose PROBE_RTT every 10 s drains the queue its flows built (with cubic the same run has
no step; docs/kinds.md, rrul)."""

from __future__ import annotations

import numpy as np
import pytest

from hoplab.analysis import levels
from hoplab.kinds.figures import phase_latency
from hoplab.kinds.flow import Outcome
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.experiment import Test as TestSpec


def _rtts(step_at: float | None) -> tuple[list[float], list[float]]:
    """A ping every 0.2 s through a 20 s load from 5 s: about 62 ms, 20 ms from step_at."""
    rng = np.random.default_rng(3)
    t = [5.0 + 0.2 * i for i in range(100)]
    v = [float((62.0 if step_at is None or x < step_at else 20.0) * rng.uniform(0.85, 1.15))
         for x in t]
    return t, v


def test_a_step_is_found_with_both_levels() -> None:
    t, v = _rtts(15.8)
    found = levels.step(t, v)
    assert found is not None
    assert found.at_s == pytest.approx(15.8) and 55 < found.before < 69 and 17 < found.after < 23


def test_one_level_or_noise_is_no_step() -> None:
    assert levels.step(*_rtts(None)) is None
    rng = np.random.default_rng(5)
    t = [0.2 * i for i in range(100)]
    assert levels.step(t, [float(x) for x in rng.uniform(10, 60, 100)]) is None


def test_rrul_says_both_levels_beside_the_median() -> None:
    flow = Flow(name="u.ping", kind="ping", src="a", dst="z", duration_s=30.0)
    ping = Outcome(flow)
    idle_t = [0.2 * i for i in range(25)] + [25.0 + 0.2 * i for i in range(25)]
    t, v = _rtts(15.8)
    ping.rtt_t, ping.rtt_ms = idle_t[:25] + t + idle_t[25:], [0.05] * 25 + v + [0.05] * 25
    test = TestSpec(name="u", kind="rrul", src="a", dst="z", flows=(flow,),
                    phases=(Phase("idle", 0, 5), Phase("load", 5, 25),
                            Phase("idle-after", 25, 30)))
    _, notes = phase_latency(test, [ping])
    assert notes["load_levels"].startswith("6") and ", then 2" in notes["load_levels"]
    assert notes["load_levels"].endswith("ms from 10.8 s into the load")
