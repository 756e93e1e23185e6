"""Two levels in one stretch of a series: where an RTT under load steps from one level
to another and stays (BBR's PROBE_RTT, 10 s into a load, drains the queue its flows
had built: rrul's RTT falls from about 60 to 17 ms and stays there). One median across
such a step lies between the two levels, where there are no samples; this finds the
step so a view can give both."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hoplab.analysis.stats import median, percentile

MIN_SIDE_S = 3.0        # each level holds at least this long (a TCP ramp is no level)
MIN_RATIO = 2.0         # and one is at least twice the other


@dataclass(frozen=True)
class Step:
    at_s: float             # time of the first sample of the second level
    before: float           # the median of each level
    after: float


def _spread(values: Sequence[float]) -> float:
    """The ratio of a level's upper to lower quartile (inf when it reaches 0)."""
    q1, q3 = percentile(values, 25), percentile(values, 75)
    return q3 / q1 if q1 > 0 else float("inf")


def step(t: Sequence[float], v: Sequence[float]) -> Step | None:
    """The one split of (t, v) (in time order) into two stretches of at least MIN_SIDE_S
    whose medians differ by MIN_RATIO or more and where the fewest samples lie on the
    wrong side of the midpoint between them; None when there is no such step."""
    pairs = sorted(zip(t, v, strict=True))
    if len(pairs) < 8 or pairs[-1][0] - pairs[0][0] < 2 * MIN_SIDE_S:
        return None
    best: tuple[int, Step] | None = None
    for i in range(2, len(pairs) - 1):
        at = pairs[i][0]
        if at - pairs[0][0] < MIN_SIDE_S or pairs[-1][0] - at < MIN_SIDE_S:
            continue
        first, second = [x for _, x in pairs[:i]], [x for _, x in pairs[i:]]
        a, b = median(first), median(second)
        if min(a, b) <= 0 or max(a, b) / min(a, b) < MIN_RATIO:
            continue
        if max(_spread(first), _spread(second)) >= max(a, b) / min(a, b):
            continue        # a level varies less than the step between them
        mid = (a + b) / 2
        wrong = (sum((x > mid) != (a > mid) for _, x in pairs[:i])
                 + sum((x > mid) != (b > mid) for _, x in pairs[i:]))
        if best is None or wrong < best[0]:
            best = (wrong, Step(at, a, b))
    # A step most samples agree with: at most a tenth on the wrong side.
    return best[1] if best is not None and best[0] <= len(pairs) / 10 else None
