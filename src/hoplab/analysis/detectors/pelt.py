"""ruptures' PELT (Killick, Fearnhead and Eckley 2012): the segmentation of the whole
series that minimises its l2 cost plus a penalty per change point, found exactly
(`--detector pelt`). It re-solves the whole series each time, so appending values may
move a change point found before; penalised.py has the cost, penalty and constraints."""

from __future__ import annotations

from hoplab.analysis.detectors.base import Detector, Values


def locate(values: Values, min_size: int) -> list[int]:
    from hoplab.analysis.detectors.penalised import segment

    return segment("Pelt", values, min_size)


DETECTOR = Detector(
    name="pelt",
    summary="ruptures' PELT: the optimal segmentation under an l2 cost and a BIC penalty",
    locate=locate)
