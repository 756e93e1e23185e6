"""A series of values as the numerical detectors and analysis/changepoints.py read it:
every repetition in one array, with where each value starts."""

from __future__ import annotations

import numpy as np

from hoplab.analysis.detectors.base import Values


class Flat:
    """The repetitions of all values flattened, with where each value starts."""

    def __init__(self, values: Values) -> None:
        self.points = np.concatenate([np.asarray(v, dtype=float) for v in values]) \
            if values else np.zeros(0)
        self.starts = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(int)

    def span(self, lo: int, hi: int) -> np.ndarray:
        """The repetitions of values lo..hi-1."""
        return self.points[self.starts[lo]:self.starts[hi]]
