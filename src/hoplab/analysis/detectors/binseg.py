"""ruptures' binary segmentation: split the series where the l2 cost falls most, then
each part, while a split gains more than the penalty (`--detector binseg`). Greedy, so
faster than PELT and not always optimal; it re-solves the whole series each time, so
appending values may move a change point found before; penalised.py has the cost,
penalty and constraints."""

from __future__ import annotations

from hoplab.analysis.detectors.base import Detector, Values


def locate(values: Values, min_size: int) -> list[int]:
    from hoplab.analysis.detectors.penalised import segment

    return segment("Binseg", values, min_size)


DETECTOR = Detector(
    name="binseg",
    summary="ruptures' binary segmentation: greedy splits under an l2 cost and a BIC "
            "penalty",
    locate=locate)
