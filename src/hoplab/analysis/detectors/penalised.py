"""ruptures' segmentations under a penalty, as pelt.py and binseg.py use them.

The cost is l2 (a change of mean) on every repetition; a change point may only fall
between values (on a value boundary) and leaves at least `min_size` values on each side.
ruptures has no default penalty: this is the BIC one its documentation points to,
2 sigma^2 log n, sigma the noise estimated from the median absolute difference of
neighbouring repetitions (robust to the steps themselves). Such a detector decides by the
penalty, not by a test at a level, so it has no power figures.

ruptures is imported only when one of these detectors runs: it is not light, and most
commands never need it.
"""

from __future__ import annotations

import math

import numpy as np

from hoplab.analysis.detectors.base import Values


def segment(method: str, values: Values, min_size: int) -> list[int]:
    """The first value after each change point that ruptures' `method` ("Pelt",
    "Binseg") finds, in order."""
    import ruptures

    if len(values) < 2 * min_size:
        return []
    counts = [len(v) for v in values]
    signal = np.concatenate([np.asarray(v, dtype=float) for v in values])
    sigma = float(np.median(np.abs(np.diff(signal)))) / (math.sqrt(2) * 0.6745)
    # Without noise any change is real; a penalty of 0 would also split where nothing
    # changes (a split that gains nothing costs nothing), so keep it above 0.
    pen = max(2 * sigma ** 2 * math.log(len(signal)), 1e-12 * float(np.var(signal)),
              1e-300)
    if len(set(counts)) == 1:
        reps = counts[0]
        algo = getattr(ruptures, method)(model="l2", min_size=min_size * reps, jump=reps)
        return [b // reps for b in algo.fit(signal).predict(pen=pen)[:-1]]
    # Uneven repetitions: break anywhere, then move each break to the nearest value
    # boundary, keeping min_size values between them.
    algo = getattr(ruptures, method)(model="l2", min_size=min_size * min(counts), jump=1)
    starts = np.cumsum([0, *counts])
    found: list[int] = []
    for b in algo.fit(signal).predict(pen=pen)[:-1]:
        cut = int(np.argmin(np.abs(starts - b)))
        if cut - (found[-1] if found else 0) >= min_size and len(values) - cut >= min_size:
            found.append(cut)
    return found
