"""hoplab's change-point detector (`--detector edivisive`, the default): a sequential,
windowed E-divisive means detector (Matteson and James 2014, the divergence Hunter /
Apache Otava rank splits by) with a significance test of our own.

Values are read left to right, as they would be appended. At each new value t the
window holds the values since the last change point, at most WINDOW of them; the split
of the window with the largest E-divisive divergence is the candidate. It is a change
point when it has at least `min_size` values on each side, when a Mann-Whitney rank test
of the repetitions on its two sides gives p below ALPHA after a Bonferroni correction
for the number of splits tried, and, while it has few values after it yet, when the step
is at least SHORT_STEP times the noise (two values high together by chance are a blip,
not a step). The candidate is sought up to the newest value, so a step among the newest
values holds the decision back instead of pulling the change point early. The window
then restarts at the change point, and the stretch before it is searched again (a larger
step found first can hide a smaller one just before it).

Every decision is taken on the values up to t only, so appending values never moves or
removes a change point found before (tests/unit/test_changepoints.py checks it). Read
from the method's descriptions, not from Otava's code or package.

This module is the detector's face (what --help lists); its numerical work, and
SHORT_STEP, are in edivisive_scan.py, loaded when it first locates.
"""

from __future__ import annotations

from hoplab.analysis.detectors.base import MIN_SIZE, Detector, Values

WINDOW = 40                 # values a window holds at most
ALPHA = 0.0005              # per decision, after the correction for the splits tried


def locate(values: Values, *, min_size: int = MIN_SIZE, window: int = WINDOW,
           alpha: float = ALPHA) -> list[int]:
    """The indexes of the first value after each change point, in order."""
    from hoplab.analysis.detectors.edivisive_scan import scan

    return scan(values, min_size=min_size, window=window, alpha=alpha)


DETECTOR = Detector(
    name="edivisive",
    summary="E-divisive means on every repetition, each step confirmed by a rank test "
            f"(p < {ALPHA:g}, Bonferroni over the splits tried); appending values never "
            "moves a step found before",
    locate=lambda values, min_size: locate(values, min_size=min_size),
    alpha=ALPHA, window=WINDOW)
